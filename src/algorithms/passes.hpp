// What algorithms share besides their rows: the passes several algorithms are built from
// (ring and recursive-halving reduce-scatter, ring and recursive-doubling all-gather) and
// the shape conditions of some rows (the start of every arena call is in arena_call.hpp).
// An algorithm built from whole other algorithms (reduce + broadcast, the hierarchical
// phases) runs their rows (algorithm.hpp's rows::).
//
// Every function here implements Call as algorithm.hpp and DESIGN.md define it and throws
// chorus::Error from the transport or the arena.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/patterns/blocks.hpp"

#include <cstddef>

namespace chorus::algorithms {

// cma (cma.hpp) and shm_window (window.hpp) algorithms hand a call they cannot serve after
// all to their shm_direct counterpart (hand_over, common.hpp); their run functions are
// their rows' own.

/// Declines rank counts that are not powers of two.
bool accepts_power_of_two(const Call& args, int nranks);
/// Accepts when a rank's larger buffer holds more than kMinWindowBytes (window.hpp).
bool accepts_shared_window(const Call& args, int nranks);

// Building blocks (n >= 2), with blocks cut by patterns::block_of(total, n, i).

/// Ring reduce-scatter of the n blocks of `contribution` (`total` elements, this
/// rank's input) with args.op: on return `out` (block `rank`'s size) holds block
/// `rank` reduced over every rank. `out` may alias block `rank` of `contribution`.
void ring_reduce_scatter_pass(const Call& args, const Context& ctx, const void* contribution,
                              std::size_t total, void* out);

/// Pairwise reduce-scatter of the n blocks of `contribution`, as ring_reduce_scatter_pass
/// leaves them, but every block goes straight to its owner unreduced (in args.dtype; the
/// owner keeps partial_type(args) sums and rounds once): no partial result ever travels.
void pairwise_reduce_scatter_pass(const Call& args, const Context& ctx, const void* contribution,
                                  std::size_t total, void* out);

/// Ring all-gather in place: `buffer` holds `total` elements in n blocks, this
/// rank's block already in place; on return every block is.
void ring_allgather_pass(const Call& args, const Context& ctx, void* buffer, std::size_t total);

/// `units` units of `unit` elements cut into `parts` (a power of two) groups by
/// patterns::block_of(units, parts, g); see halving.cpp.
struct CoreGroups {
  std::size_t units;
  std::size_t unit;
  int parts;
  /// Elements of the groups [first, first + groups), one contiguous range.
  patterns::Block span(int first, int groups) const;
};

/// Recursive-halving reduce-scatter among core ranks [0, groups.parts) (this
/// rank is one) into `work`, which holds partial_type(args) elements (algorithms/partials.hpp):
/// `input` is this rank's whole unreduced input in args.dtype (every core rank passes one, or
/// none does), or nullptr when `work` already holds this rank's partial. On return group
/// `rank` of `work` holds the reduction over the core, not yet rounded or divided.
/// `work` may be `input` when the two types are equal.
void halving_reduce_scatter_pass(const Call& args, const Context& ctx, const void* input,
                                 void* work, const CoreGroups& groups);

/// Recursive-doubling all-gather among the core ranks: group `rank` of
/// `buffer` is in place; on return every group is.
void doubling_allgather_pass(const Call& args, const Context& ctx, void* buffer,
                             const CoreGroups& groups);

}  // namespace chorus::algorithms
