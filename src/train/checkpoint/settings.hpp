// Comparing recorded settings (a run's configuration, a model's description) for the
// sentences that refuse a checkpoint.
#pragma once

#include <chorus/train/checkpoint.hpp>

#include <string>
#include <utility>

namespace chorus::train::detail {

/// The settings on which `saved` and `current` differ, each side joined in key order
/// ("--hidden 128, --lr (not recorded) and world size 2"); two empty strings when they agree.
std::pair<std::string, std::string> differing_settings(const RunConfig& saved,
                                                       const RunConfig& current);

}  // namespace chorus::train::detail
