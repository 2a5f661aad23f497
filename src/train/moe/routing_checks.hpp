// The routing options' checks, shared by route_tokens and the layer's constructor.
#pragma once

#include <chorus/train/moe.hpp>

#include <cstdint>

namespace chorus::train::detail {

/// InvalidArgument naming the value for k outside {1, 2} or above `experts`, a capacity factor
/// ≤ 0 without dropless, a negative group size.
void check_routing_options(const MoeRoutingOptions& options, std::int64_t experts);

}  // namespace chorus::train::detail
