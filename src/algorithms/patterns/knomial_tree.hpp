// K-nomial tree rank arithmetic relative to a root (pure functions, no I/O).
//
// Write the relative rank v = (rank - root) mod n in base k. The parent of
// v > 0 is v with its lowest non-zero digit cleared. The children of v are
// v + t * k^j for t in [1, k) and every k^j below span(v), where span(v) is
// k^(position of v's lowest non-zero digit) (the smallest power of k >= n for
// the root), keeping those below n. Child c = v + t * k^j has span k^j and its
// subtree covers [c, c + k^j), so the children's subtrees tile (v, v + span(v))
// and every subtree is a contiguous relative range clipped to n. The depth is
// ceil(log_k n); a rank has up to (k - 1) children per level. k = 2 is the
// binomial tree (binomial_tree.hpp).
#pragma once

#include "algorithms/patterns/modular.hpp"

#include <vector>

namespace chorus::algorithms::patterns {

inline constexpr int kDefaultRadix = 4;

/// k^(lowest non-zero digit of v) for v > 0; the smallest power of k >= n for v = 0.
constexpr int knomial_span(int relative, int n, int radix) {
  int span = 1;
  if (relative == 0) {
    while (span < n) span *= radix;
    return span;
  }
  while (relative % (span * radix) == 0) span *= radix;
  return span;
}

/// Parent of `rank` in the radix-k tree rooted at `root`; -1 for the root.
constexpr int knomial_parent(int rank, int root, int n, int radix) {
  int v = wrap(rank - root, n);
  if (v == 0) return -1;
  int span = knomial_span(v, n, radix);
  int digit = (v / span) % radix;
  return wrap(v - digit * span + root, n);
}

/// Children of `rank`, nearest (smallest subtree) first: level by level
/// k^0, k^1, ..., each level in order t = 1 .. k-1.
inline std::vector<int> knomial_children(int rank, int root, int n, int radix) {
  std::vector<int> children;
  int v = wrap(rank - root, n);
  int span = knomial_span(v, n, radix);
  for (int step = 1; step < span; step *= radix) {
    for (int t = 1; t < radix && v + t * step < n; ++t) {
      children.push_back(wrap(v + t * step + root, n));
    }
  }
  return children;
}

/// Number of levels: ceil(log_k n) (0 for one rank).
constexpr int knomial_depth(int n, int radix) {
  int depth = 0;
  for (int span = 1; span < n; span *= radix) ++depth;
  return depth;
}

}  // namespace chorus::algorithms::patterns
