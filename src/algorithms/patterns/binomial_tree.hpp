// Binomial tree rank arithmetic relative to a root (pure functions, no I/O).
//
// Work in relative ranks v = (rank - root) mod n, so the root is v = 0. The
// parent of v > 0 is v with its lowest set bit cleared; the children of v are
// v + m for every power of two m below lowbit(v) (below bit_ceil(n) for the
// root) with v + m < n. The subtree of v is then the contiguous relative range
// [v, v + span(v)) clipped to n, where span(v) = lowbit(v): child v + m has
// lowbit m and covers [v + m, v + 2m), and those ranges tile (v, v + span(v)).
// Contiguous subtrees are what gather and scatter rely on; the depth is
// ceil(log2 n).
#pragma once

#include "algorithms/patterns/ring.hpp"

#include <bit>
#include <vector>

namespace chorus::algorithms::patterns {

constexpr int relative_rank(int rank, int root, int n) { return wrap(rank - root, n); }
constexpr int absolute_rank(int relative, int root, int n) { return wrap(relative + root, n); }

/// lowbit(v) for v > 0; bit_ceil(n) for the root (v = 0).
constexpr int binomial_span(int relative, int n) {
  return relative == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(n)))
                       : (relative & -relative);
}

/// Parent of `rank` in the tree rooted at `root`; -1 for the root.
constexpr int binomial_parent(int rank, int root, int n) {
  int v = relative_rank(rank, root, n);
  return v == 0 ? -1 : absolute_rank(v - (v & -v), root, n);
}

/// Number of ranks in the subtree of `rank` (itself included).
constexpr int binomial_subtree_size(int rank, int root, int n) {
  int v = relative_rank(rank, root, n);
  int span = binomial_span(v, n);
  return span < n - v ? span : n - v;
}

/// Children of `rank` in order of growing span: v + 1, v + 2, v + 4, ... (the
/// last subtree may be clipped by n, so sizes need not grow strictly).
inline std::vector<int> binomial_children(int rank, int root, int n) {
  std::vector<int> children;
  int v = relative_rank(rank, root, n);
  for (int m = 1; m < binomial_span(v, n) && v + m < n; m <<= 1) {
    children.push_back(absolute_rank(v + m, root, n));
  }
  return children;
}

}  // namespace chorus::algorithms::patterns
