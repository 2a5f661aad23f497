// Recursive-halving reduce-scatter steps over p = 2^m core ranks (pure
// functions; the fold of extra ranks is recursive_doubling.hpp's).
//
// The data is cut into p groups. Before round j a core rank owns the groups of
// its aligned window of width w = p / 2^j (the one containing its own index).
// It keeps the half of the window holding its own index and sends the other
// half to partner r ^ (w / 2), which keeps exactly that half; both fold what
// they receive into the half they keep. The windows halve every round, so
// after log2 p rounds rank r owns group r, reduced over all p ranks. The
// all-gather by recursive doubling (recursive_doubling.hpp) undoes the windows
// in reverse order.
#pragma once

namespace chorus::algorithms::patterns {

struct HalvingStep {
  int partner;
  int keep_first;  ///< groups [keep_first, keep_first + half) kept and reduced
  int send_first;  ///< groups [send_first, send_first + half) sent to partner
  int half;        ///< groups per half
};

/// Round `round` in [0, log2 p) for core rank `rank` of p.
constexpr HalvingStep recursive_halving_step(int rank, int p, int round) {
  int half = (p >> round) >> 1;
  int start = rank & ~(2 * half - 1);
  bool upper = (rank & half) != 0;
  return {rank ^ half, upper ? start + half : start, upper ? start : start + half, half};
}

}  // namespace chorus::algorithms::patterns
