// The registry: every algorithm, its collective, a one-line description and
// the cases it accepts. New algorithms are added to the table below (and to
// catalog.hpp); tests iterate all_algorithms(), so they are swept automatically.
#include "algorithms/algorithm.hpp"
#include "algorithms/catalog.hpp"

#include <array>

namespace chorus::algorithms {
namespace {

using C = Collective;

/// Algorithm::accumulates_halves: every reducing algorithm but hierarchical, whose phases
/// (a reduce to each host's leader, an all-reduce among the leaders) would round twice.
constexpr bool kHalves = true;

// Grouped by collective, in the order of the Collective enum.
constexpr std::array kAlgorithms = {
    Algorithm{"ring", "reduce-scatter ring, then all-gather ring; bandwidth-optimal", C::AllReduce,
              nullptr, allreduce_ring, kHalves},
    Algorithm{"recursive_doubling",
              "log2 n exchanges of the whole buffer; extra ranks of a non-power of two fold in",
              C::AllReduce, nullptr, allreduce_recursive_doubling, kHalves},
    Algorithm{"reduce_broadcast", "binomial reduce to rank 0, then binomial broadcast",
              C::AllReduce, nullptr, allreduce_reduce_broadcast, kHalves},
    Algorithm{"rabenseifner",
              "reduce-scatter by recursive halving, all-gather by recursive doubling; extras fold",
              C::AllReduce, nullptr, allreduce_rabenseifner, kHalves},
    Algorithm{"hierarchical",
              "k-nomial reduce to each host's leader, leaders all-reduce, broadcast", C::AllReduce,
              nullptr, allreduce_hierarchical},
    Algorithm{"shm_direct", "one host: every rank reduces its slice of all inputs in the arena",
              C::AllReduce, accepts_host_arena, allreduce_shm_direct, kHalves},
    Algorithm{"cma", "one host: reduce-scatter, all-gather by cross-memory reads of peer buffers",
              C::AllReduce, accepts_cma, allreduce_cma, kHalves},
    Algorithm{"shm_window",
              "one host, buffers in shared windows: each rank reduces its slice in place",
              C::AllReduce, accepts_shared_window, allreduce_shm_window, kHalves},
    Algorithm{"binomial", "binomial tree from the root, largest subtree first", C::Broadcast,
              nullptr, broadcast_binomial},
    Algorithm{"ring", "pipelined chain from the root, in chunks", C::Broadcast, nullptr,
              broadcast_ring},
    Algorithm{"knomial", "radix-4 tree from the root, largest subtree first", C::Broadcast, nullptr,
              broadcast_knomial},
    Algorithm{"shm_direct", "one host: the root writes the arena, every rank copies out",
              C::Broadcast, accepts_host_arena, broadcast_shm_direct},
    Algorithm{"cma", "one host: every rank copies the root's buffer with a cross-memory read",
              C::Broadcast, accepts_cma, broadcast_cma},
    Algorithm{"binomial", "binomial tree towards the root", C::Reduce, nullptr, reduce_binomial,
              kHalves},
    Algorithm{"knomial", "radix-4 tree towards the root, children received at once", C::Reduce,
              nullptr, reduce_knomial, kHalves},
    Algorithm{"shm_direct", "one host: slices reduced in the arena, the root copies out", C::Reduce,
              accepts_host_arena, reduce_shm_direct, kHalves},
    Algorithm{"ring", "n - 1 ring steps, one block each", C::AllGather, nullptr, allgather_ring},
    Algorithm{"recursive_doubling", "log2 n exchanges of doubling ranges; powers of two only",
              C::AllGather, accepts_power_of_two, allgather_recursive_doubling},
    Algorithm{"bruck", "ceil(log2 n) rounds of doubling prefixes, any rank count", C::AllGather,
              nullptr, allgather_bruck},
    Algorithm{"shm_direct", "one host: every rank writes its block to the arena, all copy out",
              C::AllGather, accepts_host_arena, allgather_shm_direct},
    Algorithm{"cma", "one host: every rank copies each peer's block with a cross-memory read",
              C::AllGather, accepts_cma, allgather_cma},
    Algorithm{"shm_window",
              "one host, buffers in shared windows: each rank copies the peers' blocks",
              C::AllGather, accepts_shared_window, allgather_shm_window},
    Algorithm{"ring", "n - 1 ring steps, one partially reduced block each", C::ReduceScatter,
              nullptr, reduce_scatter_ring, kHalves},
    Algorithm{"recursive_halving", "log2 n halving exchanges; extra ranks fold in first",
              C::ReduceScatter, nullptr, reduce_scatter_recursive_halving, kHalves},
    Algorithm{"pairwise", "n - 1 steps: each block sent straight to its owner", C::ReduceScatter,
              nullptr, reduce_scatter_pairwise, kHalves},
    Algorithm{"shm_direct", "one host: every rank reduces its block of all inputs in the arena",
              C::ReduceScatter, accepts_host_arena, reduce_scatter_shm_direct, kHalves},
    Algorithm{"shm_window",
              "one host, buffers in shared windows: each rank reduces its block in place",
              C::ReduceScatter, accepts_shared_window, reduce_scatter_shm_window, kHalves},
    Algorithm{"linear", "every rank sends its block to the root", C::Gather, nullptr,
              gather_linear},
    Algorithm{"binomial", "subtrees gathered up a binomial tree", C::Gather, nullptr,
              gather_binomial},
    Algorithm{"shm_direct", "one host: every rank writes the arena, the root copies out", C::Gather,
              accepts_host_arena, gather_shm_direct},
    Algorithm{"cma", "one host: the root reads every peer's block with a cross-memory read",
              C::Gather, accepts_cma, gather_cma},
    Algorithm{"linear", "the root sends every rank its block", C::Scatter, nullptr, scatter_linear},
    Algorithm{"binomial", "subtrees scattered down a binomial tree", C::Scatter, nullptr,
              scatter_binomial},
    Algorithm{"shm_direct", "one host: the root writes the arena, every rank copies its block",
              C::Scatter, accepts_host_arena, scatter_shm_direct},
    Algorithm{"cma", "one host: every rank reads its block of the root's buffer directly",
              C::Scatter, accepts_cma, scatter_cma},
    Algorithm{"pairwise", "n - 1 steps: send to r + k, receive from r - k", C::AllToAll, nullptr,
              alltoall_pairwise},
    Algorithm{"bruck", "ceil(log2 n) rounds of packed blocks; for small blocks", C::AllToAll,
              nullptr, alltoall_bruck},
    Algorithm{"shm_direct", "one host: every rank writes its n - 1 peers' blocks to the arena",
              C::AllToAll, accepts_host_arena, alltoall_shm_direct},
    Algorithm{"cma", "one host: every rank reads its block of each peer's input directly",
              C::AllToAll, accepts_cma, alltoall_cma},
    Algorithm{"pairwise", "n - 1 steps: send to r + k, receive from r - k", C::AllToAllV, nullptr,
              alltoallv_pairwise},
    Algorithm{"shm_direct", "one host: per-peer pieces in arena rounds; round 1 agrees counts",
              C::AllToAllV, accepts_host_arena, alltoallv_shm_direct},
    Algorithm{"dissemination", "ceil(log2 n) rounds of empty messages to r + 2^k", C::Barrier,
              nullptr, barrier_dissemination},
    Algorithm{"shm_direct", "one host: one round of arena flags", C::Barrier, accepts_host_arena,
              barrier_shm_direct},
};

}  // namespace

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : kAlgorithms) {
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

}  // namespace chorus::algorithms
