// Differences between recorded settings; see settings.hpp.
#include "settings.hpp"

#include <vector>

namespace chorus::train::detail {
namespace {

/// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

/// "key value", or "key (not recorded)".
std::string value_in(const RunConfig& config, const std::string& key) {
  const auto it = config.find(key);
  return key + " " + (it == config.end() ? std::string("(not recorded)") : it->second);
}

}  // namespace

std::pair<std::string, std::string> differing_settings(const RunConfig& saved,
                                                       const RunConfig& current) {
  std::vector<std::string> before, now;
  RunConfig keys = saved;
  keys.insert(current.begin(), current.end());
  for (const auto& entry : keys) {
    const std::string& key = entry.first;
    const auto a = saved.find(key), b = current.find(key);
    if (a != saved.end() && b != current.end() && a->second == b->second) continue;
    before.push_back(value_in(saved, key));
    now.push_back(value_in(current, key));
  }
  return {joined(before), joined(now)};
}

}  // namespace chorus::train::detail
