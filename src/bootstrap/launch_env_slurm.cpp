// Slurm's compressed host lists and the store port of a job step (see launch_env.hpp).
#include "bootstrap/launch_env.hpp"

#include <chorus/error.hpp>

#include <charconv>

namespace chorus {
namespace {

/// One `lo-hi` (or `lo`) of a bracket: numbers printed zero-padded to lo's digits.
struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;
};

[[noreturn]] void malformed(std::string_view list, const std::string& why) {
  throw Error(Status::InvalidArgument,
              std::string("host list '").append(list).append("': ").append(why));
}

[[noreturn]] void too_many(std::string_view list, std::size_t max_hosts) {
  malformed(list, "more than " + std::to_string(max_hosts) + " hosts");
}

std::uint64_t parse_number(std::string_view list, std::string_view digits) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      digits.size() > 18) {
    std::string why = "'";  // built with append: GCC 12 -O3 warns (-Wrestrict) on "'" + string
    why.append(digits).append("' in brackets is not a number of 1-18 digits");
    malformed(list, why);
  }
  return value;
}

/// The ranges inside one pair of brackets: "1-3,5,08-10".
std::vector<NumberRange> parse_ranges(std::string_view list, std::string_view inside) {
  std::vector<NumberRange> ranges;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = inside.find(',', start);
    std::string_view item = inside.substr(start, comma - start);
    std::size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    NumberRange range{parse_number(list, lo), 0, lo.size()};
    range.hi =
        dash == std::string_view::npos ? range.lo : parse_number(list, item.substr(dash + 1));
    if (range.hi < range.lo)
      malformed(list, std::string("range '").append(item).append("' ends below its start"));
    ranges.push_back(range);
    if (comma == std::string_view::npos) return ranges;
    start = comma + 1;
  }
}

std::string padded(std::uint64_t value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

/// Appends the hosts of one entry ("rack[1-2]-n[01-04]": every combination, the leftmost
/// bracket varying slowest) to `hosts`, which may hold at most max_hosts names.
void expand_entry(std::string_view list, std::string_view entry, std::size_t max_hosts,
                  std::vector<std::string>& hosts) {
  if (entry.empty()) malformed(list, "empty host name");
  std::vector<std::string> names{""};
  std::string_view rest = entry;
  while (true) {
    std::size_t open = rest.find('[');
    std::string_view literal = rest.substr(0, open);
    if (literal.find(']') != std::string_view::npos) malformed(list, "']' without '['");
    for (std::string& name : names) name.append(literal);
    if (open == std::string_view::npos) break;
    std::size_t close = rest.find(']', open);
    if (close == std::string_view::npos) malformed(list, "'[' without ']'");
    std::vector<NumberRange> ranges = parse_ranges(list, rest.substr(open + 1, close - open - 1));
    std::uint64_t count = 0;
    for (const NumberRange& r : ranges) {
      count += r.hi - r.lo + 1;  // at most 10^18 each: no overflow before the check
      if (count > max_hosts) too_many(list, max_hosts);
    }
    if (names.size() * count > max_hosts - hosts.size()) too_many(list, max_hosts);
    std::vector<std::string> longer;
    longer.reserve(names.size() * count);
    for (const std::string& name : names) {
      for (const NumberRange& r : ranges) {
        for (std::uint64_t v = r.lo; v <= r.hi; ++v) longer.push_back(name + padded(v, r.width));
      }
    }
    names = std::move(longer);
    rest = rest.substr(close + 1);
  }
  if (names.size() > max_hosts - hosts.size()) too_many(list, max_hosts);
  hosts.insert(hosts.end(), names.begin(), names.end());
}

}  // namespace

std::vector<std::string> expand_host_list(std::string_view list, std::size_t max_hosts) {
  std::vector<std::string> hosts;
  std::size_t start = 0;
  bool in_brackets = false;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (in_brackets) malformed(list, "'[' inside brackets");
      in_brackets = true;
    } else if (c == ']') {
      in_brackets = false;
    } else if (c == ',' && (!in_brackets || i == list.size())) {
      expand_entry(list, list.substr(start, i - start), max_hosts, hosts);
      start = i + 1;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      malformed(list, "white space in the list");
    }
  }
  return hosts;
}

int slurm_store_port(std::uint64_t job_id, std::uint64_t step_id) {
  constexpr std::uint64_t kFirst = 20000;
  constexpr std::uint64_t kPorts = 32768 - kFirst;  // below Linux's ephemeral ports
  return static_cast<int>(kFirst + (job_id % kPorts * 8 + step_id % 8) % kPorts);
}

}  // namespace chorus
