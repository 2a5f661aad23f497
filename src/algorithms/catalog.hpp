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

#include <cstddef>

namespace chorus::algorithms {

void allreduce_ring(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args);
void allreduce_reduce_broadcast(transport::Transport& transport, const CollectiveArgs& args);

void broadcast_binomial(transport::Transport& transport, const CollectiveArgs& args);
void broadcast_ring(transport::Transport& transport, const CollectiveArgs& args);

void reduce_binomial(transport::Transport& transport, const CollectiveArgs& args);

void allgather_ring(transport::Transport& transport, const CollectiveArgs& args);
void allgather_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args);
/// Declines rank counts that are not powers of two.
bool accepts_power_of_two(const CollectiveArgs& args, int nranks);

void reduce_scatter_ring(transport::Transport& transport, const CollectiveArgs& args);

void gather_linear(transport::Transport& transport, const CollectiveArgs& args);
void gather_binomial(transport::Transport& transport, const CollectiveArgs& args);

void scatter_linear(transport::Transport& transport, const CollectiveArgs& args);
void scatter_binomial(transport::Transport& transport, const CollectiveArgs& args);

void alltoall_pairwise(transport::Transport& transport, const CollectiveArgs& args);
void alltoallv_pairwise(transport::Transport& transport, const CollectiveArgs& args);

void barrier_dissemination(transport::Transport& transport, const CollectiveArgs& args);

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

}  // namespace chorus::algorithms
