// Bruck rank arithmetic for all-gather and all-to-all (pure functions).
//
// Both run ceil(log2 n) rounds; in round k (s = 2^k) rank r sends to r - s and
// receives from r + s for the all-gather, and sends to r + s, receiving from
// r - s, for the all-to-all.
//
// All-gather: slot i of a rank's work buffer holds the block of rank r + i.
// Before round k a rank holds slots [0, s); the rank r + s holds its own
// [0, s), which are the blocks of r + s .. r + 2s - 1, i.e. this rank's slots
// [s, 2s). Receiving min(s, n - s) of them extends the prefix to min(2s, n).
//
// All-to-all: first rotate so slot i holds the block for rank r + i. In round
// k every block whose slot index has bit k set moves to r + s, keeping its
// index. A block leaving rank a from slot i thus travels the bits of i in
// total, ending at a + i — its destination — in slot i. So at the end slot i
// of rank r holds the block from rank r - i.
#pragma once

#include "algorithms/patterns/modular.hpp"

#include <bit>
#include <vector>

namespace chorus::algorithms::patterns {

/// ceil(log2 n); 0 for one rank.
constexpr int bruck_rounds(int n) {
  return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1));
}

struct BruckGatherRound {
  Partners partners;
  int blocks;  ///< slots [s, s + blocks) received, slots [0, blocks) sent
};

constexpr BruckGatherRound bruck_allgather_round(int rank, int n, int round) {
  int s = 1 << round;
  return {{wrap(rank - s, n), wrap(rank + s, n)}, s < n - s ? s : n - s};
}

constexpr Partners bruck_alltoall_partners(int rank, int n, int round) {
  return {wrap(rank + (1 << round), n), wrap(rank - (1 << round), n)};
}

/// The slot indices that move in all-to-all round `round`: bit `round` set.
inline std::vector<int> bruck_alltoall_slots(int n, int round) {
  std::vector<int> slots;
  for (int i = 1; i < n; ++i) {
    if ((i >> round) & 1) slots.push_back(i);
  }
  return slots;
}

}  // namespace chorus::algorithms::patterns
