// Ring and chain rank arithmetic (pure functions, no I/O).
//
// A ring orders the ranks 0 -> 1 -> ... -> n-1 -> 0. The step tables below are
// what the ring reduce-scatter and all-gather passes use; their derivations sit
// next to each function.
#pragma once

#include "algorithms/patterns/modular.hpp"

namespace chorus::algorithms::patterns {

constexpr int ring_next(int rank, int n) { return wrap(rank + 1, n); }
constexpr int ring_prev(int rank, int n) { return wrap(rank - 1, n); }

/// Which block a rank sends to ring_next and receives from ring_prev at one step.
struct RingStep {
  int send_block;
  int recv_block;
};

/// Reduce-scatter step `step` in [0, n-1): send block r-s-1, receive block r-s-2.
/// The predecessor r-1 sends (r-1)-s-1 = r-s-2 at the same step, so sender and
/// receiver agree. Block b starts at rank b+1 (step 0) and gains one
/// contribution per hop; the block received at step s carries s+1 of them and
/// the receiver adds its own. At the last step (s = n-2) rank r receives block
/// r-n = r with n-1 contributions and adds the n-th: rank r ends owning block r.
constexpr RingStep reduce_scatter_step(int rank, int n, int step) {
  return {wrap(rank - step - 1, n), wrap(rank - step - 2, n)};
}

/// All-gather step `step` in [0, n-1) when rank r starts owning block r: send
/// block r-s (its own at step 0, afterwards the one just received), receive
/// block r-s-1, which the predecessor sends as its (r-1)-s. After n-1 steps
/// rank r has received r-1, r-2, ..., r-(n-1): every block.
constexpr RingStep allgather_step(int rank, int n, int step) {
  return {wrap(rank - step, n), wrap(rank - step - 1, n)};
}

/// Neighbours of a rank in the chain root -> root+1 -> ... -> root+n-1 (mod n);
/// -1 where the chain ends.
struct ChainLinks {
  int prev;
  int next;
};

constexpr ChainLinks chain_links(int rank, int root, int n) {
  int position = wrap(rank - root, n);
  return {position == 0 ? -1 : wrap(rank - 1, n), position == n - 1 ? -1 : wrap(rank + 1, n)};
}

}  // namespace chorus::algorithms::patterns
