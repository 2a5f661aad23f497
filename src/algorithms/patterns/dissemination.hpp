// Dissemination partners (the barrier's pattern; pure functions).
//
// Round k: send to rank + 2^k, receive from rank - 2^k (mod n). By induction,
// after round k a rank has heard, directly or through others, from the
// 2^(k+1) - 1 ranks before it (round k adds those that the rank 2^k before it
// had heard of, plus that rank itself). After ceil(log2 n) rounds that covers
// all n - 1 others, whatever n is.
#pragma once

#include "algorithms/patterns/modular.hpp"

#include <bit>

namespace chorus::algorithms::patterns {

/// ceil(log2 n); 0 for one rank.
constexpr int dissemination_rounds(int n) {
  return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1));
}

constexpr Partners dissemination_partners(int rank, int n, int round) {
  return {wrap(rank + (1 << round), n), wrap(rank - (1 << round), n)};
}

}  // namespace chorus::algorithms::patterns
