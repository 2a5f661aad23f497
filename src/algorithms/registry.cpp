// The registry: every algorithm, its collective, a one-line description and
// the cases it accepts. New algorithms are added to the table below (and to
// catalog.hpp); tests iterate all_algorithms(), so they are swept automatically.
#include "algorithms/algorithm.hpp"
#include "algorithms/catalog.hpp"

#include <array>

namespace chorus::algorithms {
namespace {

using C = Collective;

// Grouped by collective, in the order of the Collective enum.
constexpr std::array kAlgorithms = {
    Algorithm{"ring", "reduce-scatter ring, then all-gather ring; bandwidth-optimal", C::AllReduce,
              nullptr, allreduce_ring},
    Algorithm{"recursive_doubling",
              "log2 n exchanges of the whole buffer; extra ranks of a non-power of two fold in",
              C::AllReduce, nullptr, allreduce_recursive_doubling},
    Algorithm{"reduce_broadcast", "binomial reduce to rank 0, then binomial broadcast",
              C::AllReduce, nullptr, allreduce_reduce_broadcast},
    Algorithm{"binomial", "binomial tree from the root, largest subtree first", C::Broadcast,
              nullptr, broadcast_binomial},
    Algorithm{"ring", "pipelined chain from the root, in chunks", C::Broadcast, nullptr,
              broadcast_ring},
    Algorithm{"binomial", "binomial tree towards the root", C::Reduce, nullptr, reduce_binomial},
    Algorithm{"ring", "n - 1 ring steps, one block each", C::AllGather, nullptr, allgather_ring},
    Algorithm{"recursive_doubling", "log2 n exchanges of doubling ranges; powers of two only",
              C::AllGather, accepts_power_of_two, allgather_recursive_doubling},
    Algorithm{"ring", "n - 1 ring steps, one partially reduced block each", C::ReduceScatter,
              nullptr, reduce_scatter_ring},
    Algorithm{"linear", "every rank sends its block to the root", C::Gather, nullptr,
              gather_linear},
    Algorithm{"binomial", "subtrees gathered up a binomial tree", C::Gather, nullptr,
              gather_binomial},
    Algorithm{"linear", "the root sends every rank its block", C::Scatter, nullptr, scatter_linear},
    Algorithm{"binomial", "subtrees scattered down a binomial tree", C::Scatter, nullptr,
              scatter_binomial},
    Algorithm{"pairwise", "n - 1 steps: send to r + k, receive from r - k", C::AllToAll, nullptr,
              alltoall_pairwise},
    Algorithm{"pairwise", "n - 1 steps: send to r + k, receive from r - k", C::AllToAllV, nullptr,
              alltoallv_pairwise},
    Algorithm{"dissemination", "ceil(log2 n) rounds of empty messages to r + 2^k", C::Barrier,
              nullptr, barrier_dissemination},
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
