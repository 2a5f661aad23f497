// Every algorithm's entry point, one per src/algorithms/<collective>/<name>.cpp.
// The registry (registry.cpp) lists them; algorithms that are built from other
// algorithms (all-reduce = reduce-scatter + all-gather, reduce + broadcast)
// call these too.
//
// Each run function implements CollectiveArgs exactly as algorithm.hpp and
// DESIGN.md define it for its collective (in place, NULL unused buffers, count
// 0, one rank) and throws chorus::Error from the transport.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/patterns/blocks.hpp"

#include <cstddef>

namespace chorus::transport::shm {
class HostArena;
}

namespace chorus::algorithms {

void allreduce_ring(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_reduce_broadcast(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_rabenseifner(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_hierarchical(transport::Transport& transport, const CollectiveArgs& args);

void broadcast_binomial(transport::Transport& transport, const CollectiveArgs& args);
void broadcast_ring(transport::Transport& transport, const CollectiveArgs& args);
void broadcast_knomial(transport::Transport& transport, const CollectiveArgs& args);

void reduce_binomial(transport::Transport& transport, const CollectiveArgs& args);
void reduce_knomial(transport::Transport& transport, const CollectiveArgs& args);

void allgather_ring(transport::Transport& transport, const CollectiveArgs& args);
void allgather_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args);
/// Declines rank counts that are not powers of two.
bool accepts_power_of_two(const CollectiveArgs& args, int nranks);
void allgather_bruck(transport::Transport& transport, const CollectiveArgs& args);

void reduce_scatter_ring(transport::Transport& transport, const CollectiveArgs& args);
void reduce_scatter_recursive_halving(transport::Transport& transport, const CollectiveArgs& args);
void reduce_scatter_pairwise(transport::Transport& transport, const CollectiveArgs& args);

void gather_linear(transport::Transport& transport, const CollectiveArgs& args);
void gather_binomial(transport::Transport& transport, const CollectiveArgs& args);

void scatter_linear(transport::Transport& transport, const CollectiveArgs& args);
void scatter_binomial(transport::Transport& transport, const CollectiveArgs& args);

void alltoall_pairwise(transport::Transport& transport, const CollectiveArgs& args);
void alltoall_bruck(transport::Transport& transport, const CollectiveArgs& args);
void alltoallv_pairwise(transport::Transport& transport, const CollectiveArgs& args);

void barrier_dissemination(transport::Transport& transport, const CollectiveArgs& args);

// shm_direct: collectives worked directly in the transport's host arena
// (transport/shm/host_arena.hpp); they accept only when it exists.
void allreduce_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void broadcast_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void reduce_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void allgather_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void reduce_scatter_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void gather_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void scatter_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void alltoall_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void alltoallv_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
void barrier_shm_direct(transport::Transport& transport, const CollectiveArgs& args);
/// Accepts when args.host_arena (every rank on this host, shared memory allowed).
bool accepts_host_arena(const CollectiveArgs& args, int nranks);
/// The transport's host arena with the call begun (fingerprint published).
transport::shm::HostArena& begin_arena_call(transport::Transport& transport,
                                            const CollectiveArgs& args);

// cma: single-copy reads of the peers' buffers (transport/shm/cross_memory.hpp),
// ordered by arena flags (algorithms/cma.hpp); accept like shm_direct unless
// CHORUS_CMA=0, and run their shm_direct counterpart (and name it in
// args.ran_as) where the kernel forbids the reads.
void allreduce_cma(transport::Transport& transport, const CollectiveArgs& args);
void broadcast_cma(transport::Transport& transport, const CollectiveArgs& args);
void allgather_cma(transport::Transport& transport, const CollectiveArgs& args);
void alltoall_cma(transport::Transport& transport, const CollectiveArgs& args);
void gather_cma(transport::Transport& transport, const CollectiveArgs& args);
void scatter_cma(transport::Transport& transport, const CollectiveArgs& args);
/// Accepts when args.host_arena and args.allow_cma.
bool accepts_cma(const CollectiveArgs& args, int nranks);

// shm_window: collectives on buffers inside the communicator's shared windows
// (transport/shm/windows.hpp) read and write the peers' buffers in place
// (algorithms/window.hpp); when some rank's buffers lie outside, they run their
// shm_direct counterpart (named in args.ran_as).
void allreduce_shm_window(transport::Transport& transport, const CollectiveArgs& args);
void reduce_scatter_shm_window(transport::Transport& transport, const CollectiveArgs& args);
void allgather_shm_window(transport::Transport& transport, const CollectiveArgs& args);
/// Accepts when args.host_arena, args.shared_windows and a rank's larger buffer holds more
/// than kMinWindowBytes (algorithms/window.hpp).
bool accepts_shared_window(const CollectiveArgs& args, int nranks);

// Building blocks (n >= 2), with blocks cut by patterns::block_of(total, n, i).

/// Ring reduce-scatter of the n blocks of `contribution` (`total` elements, this
/// rank's input) with args.op: on return `out` (block `rank`'s size) holds block
/// `rank` reduced over every rank. `out` may alias block `rank` of `contribution`.
void ring_reduce_scatter_pass(transport::Transport& transport, const CollectiveArgs& args,
                              const void* contribution, std::size_t total, void* out);

/// Ring all-gather in place: `buffer` holds `total` elements in n blocks, this
/// rank's block already in place; on return every block is.
void ring_allgather_pass(transport::Transport& transport, const CollectiveArgs& args, void* buffer,
                         std::size_t total);

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
void halving_reduce_scatter_pass(transport::Transport& transport, const CollectiveArgs& args,
                                 const void* input, void* work, const CoreGroups& groups);

/// Recursive-doubling all-gather among the core ranks: group `rank` of
/// `buffer` is in place; on return every group is.
void doubling_allgather_pass(transport::Transport& transport, const CollectiveArgs& args,
                             void* buffer, const CoreGroups& groups);

}  // namespace chorus::algorithms
