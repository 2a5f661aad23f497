// Pairwise-exchange partners (the all-to-all pattern; pure functions).
//
// Step k in [1, n): send to rank + k, receive from rank - k (mod n). Over the
// n - 1 steps every ordered pair (a, b), a != b, meets exactly once, at
// k = b - a mod n; and at each step the rank a receiver listens to is exactly
// the rank whose destination is that receiver, so sends and receives pair up.
#pragma once

#include "algorithms/patterns/modular.hpp"

namespace chorus::algorithms::patterns {

constexpr Partners pairwise_partners(int rank, int n, int step) {
  return {wrap(rank + step, n), wrap(rank - step, n)};
}

}  // namespace chorus::algorithms::patterns
