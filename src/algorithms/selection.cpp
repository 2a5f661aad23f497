// Algorithm selection: the default table, CHORUS_ALGO parsing, and the
// fallback when a named algorithm declines a case. Everything here is a pure
// function of its arguments, so every rank of a call picks the same algorithm.
#include "algorithms/selection.hpp"

#include <chorus/error.hpp>

#include <string>

namespace chorus::algorithms {
namespace {

constexpr std::size_t kKiB = 1024;

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

bool any_collective_has(std::string_view name) {
  for (const Algorithm& algorithm : all_algorithms()) {
    if (algorithm.name == name) return true;
  }
  return false;
}

std::string names_of(Collective collective) {
  std::string names;
  for (const Algorithm& algorithm : all_algorithms()) {
    if (algorithm.collective != collective) continue;
    names += (names.empty() ? "" : ", ") + std::string(algorithm.name);
  }
  return names.empty() ? "none" : names;
}

AlgorithmOverride parse_entry(std::string_view entry) {
  std::string quoted = "CHORUS_ALGO entry '" + std::string(entry) + "'";
  auto equals = entry.find('=');
  AlgorithmOverride parsed;
  parsed.name = trim(equals == std::string_view::npos ? entry : entry.substr(equals + 1));
  require_argument(!parsed.name.empty(), quoted + " names no algorithm");
  if (equals == std::string_view::npos) {
    require_argument(any_collective_has(parsed.name),
                     quoted + " matches no algorithm of any collective");
    return parsed;
  }
  Collective collective;
  require_argument(parse_collective(trim(entry.substr(0, equals)), &collective),
                   quoted + " names an unknown collective");
  require_argument(find_algorithm(collective, parsed.name) != nullptr,
                   quoted + ": " + std::string(to_string(collective)) + " has no algorithm '" +
                       parsed.name + "' (it has: " + names_of(collective) + ")");
  parsed.collective = collective;
  return parsed;
}

}  // namespace

std::vector<AlgorithmOverride> parse_algorithm_override(std::string_view spec) {
  std::vector<AlgorithmOverride> overrides;
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view entry = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (!entry.empty()) overrides.push_back(parse_entry(entry));
  }
  return overrides;
}

std::string_view requested_algorithm(const std::vector<AlgorithmOverride>& overrides,
                                     Collective collective) {
  std::string_view specific, bare;
  for (const AlgorithmOverride& entry : overrides) {
    if (entry.collective == collective) specific = entry.name;
    if (!entry.collective && find_algorithm(collective, entry.name)) bare = entry.name;
  }
  return specific.empty() ? bare : specific;
}

bool algorithm_accepts(const Algorithm& algorithm, const CollectiveArgs& args, int nranks) {
  return algorithm.accepts == nullptr || algorithm.accepts(args, nranks);
}

std::size_t selection_bytes(const CollectiveArgs& args) {
  return args.count * dtype_size(args.dtype);
}

std::string_view preferred_algorithm(Collective collective, std::size_t bytes, int nranks) {
  switch (collective) {
    case Collective::AllReduce:
      return bytes < 64 * kKiB ? "recursive_doubling" : "ring";
    case Collective::Broadcast:
      return bytes >= 1024 * kKiB && nranks > 2 ? "ring" : "binomial";
    case Collective::Reduce:
      return "binomial";
    case Collective::AllGather:
      return bytes * static_cast<std::size_t>(nranks) < 64 * kKiB ? "recursive_doubling" : "ring";
    case Collective::ReduceScatter:
      return "ring";
    case Collective::Gather:
    case Collective::Scatter:
      return "linear";
    case Collective::AllToAll:
    case Collective::AllToAllV:
      return "pairwise";
    case Collective::Barrier:
      return "dissemination";
    case Collective::Send:
    case Collective::Recv:
      break;
  }
  throw Error(Status::InvalidUsage, std::string(to_string(collective)) +
                                        " has no algorithms; the communicator moves it itself");
}

const Algorithm& default_algorithm(const CollectiveArgs& args, int nranks) {
  std::string_view name = preferred_algorithm(args.collective, selection_bytes(args), nranks);
  const Algorithm* preferred = find_algorithm(args.collective, name);
  if (preferred && algorithm_accepts(*preferred, args, nranks)) return *preferred;
  for (const Algorithm& algorithm : all_algorithms()) {
    if (algorithm.collective == args.collective && algorithm_accepts(algorithm, args, nranks)) {
      return algorithm;
    }
  }
  throw Error(Status::InternalError, "no registered algorithm accepts this " +
                                         std::string(to_string(args.collective)) + " on " +
                                         std::to_string(nranks) + " ranks");
}

const Algorithm& select_algorithm(const CollectiveArgs& args, int nranks,
                                  std::string_view override_spec) {
  return select_algorithm(args, nranks, parse_algorithm_override(override_spec));
}

const Algorithm& select_algorithm(const CollectiveArgs& args, int nranks,
                                  const std::vector<AlgorithmOverride>& overrides) {
  std::string_view name = requested_algorithm(overrides, args.collective);
  if (!name.empty()) {
    const Algorithm* requested = find_algorithm(args.collective, name);
    if (requested && algorithm_accepts(*requested, args, nranks)) return *requested;
  }
  return default_algorithm(args, nranks);
}

}  // namespace chorus::algorithms
