// Recursive-doubling partners, with the extra ranks of a non-power-of-two
// count (pure functions).
//
// The core is the largest power of two p <= n: ranks [0, p). Each extra rank
// e in [p, n) is folded into core rank e - p: it hands its data over before the
// exchange rounds and gets the result back after them. In round k core rank r
// exchanges with r ^ 2^k. Before round k, rank r holds what the 2^k-aligned
// group containing r contributed; the partner holds the other half of the
// 2^(k+1)-aligned group, so after round k each holds that whole group, and
// after log2 p rounds the whole core (which includes the folded extras).
#pragma once

#include <bit>

namespace chorus::algorithms::patterns {

struct RecursiveDoubling {
  int core_size;     ///< p, the largest power of two <= n
  int rounds;        ///< log2 p
  bool is_extra;     ///< rank >= p: takes part only through fold_partner
  int fold_partner;  ///< the rank folded with this one, or -1
};

constexpr RecursiveDoubling recursive_doubling(int rank, int n) {
  int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  int rounds = std::bit_width(static_cast<unsigned>(p)) - 1;
  if (rank >= p) return {p, rounds, true, rank - p};
  return {p, rounds, false, rank + p < n ? rank + p : -1};
}

/// The core partner in round k.
constexpr int recursive_doubling_partner(int rank, int round) { return rank ^ (1 << round); }

/// First rank of the 2^round-aligned group containing `rank`: before round
/// `round` the rank holds the blocks [group_start, group_start + 2^round).
constexpr int recursive_doubling_group_start(int rank, int round) {
  return rank & ~((1 << round) - 1);
}

}  // namespace chorus::algorithms::patterns
