// Recursive-doubling all-gather (power-of-two rank counts only).
//
// Before round k rank r holds the blocks of its 2^k-aligned group
// [r & ~(2^k - 1), +2^k), contiguous in `recv`. It swaps that range with
// partner r ^ 2^k, which holds the other half of their 2^(k+1)-aligned group,
// so afterwards both hold the whole larger group; after log2 n rounds everyone
// holds all n blocks. log2 n steps instead of the ring's n - 1, same volume.
// Other rank counts are declined (accepts_power_of_two) and selection falls
// back to the ring.
#include "algorithms/patterns/recursive_doubling.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

#include <chorus/error.hpp>

#include <bit>
#include <string>

namespace chorus::algorithms {

bool accepts_power_of_two(const CollectiveArgs&, int nranks) {
  return std::has_single_bit(static_cast<unsigned>(nranks));
}

void allgather_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args) {
  if (!accepts_power_of_two(args, transport.size())) {
    throw Error(Status::InvalidUsage,
                "allgather recursive_doubling needs a power-of-two rank "
                "count, not " +
                    std::to_string(transport.size()));
  }
  if (finish_trivial_call(transport, args)) return;
  const int rank = transport.rank();
  copy_elements(element_at(args.recv, static_cast<std::size_t>(rank) * args.count, args.dtype),
                args.send, args.count, args.dtype);
  const auto plan = patterns::recursive_doubling(rank, transport.size());
  RequestSet requests(transport, args);
  for (int round = 0; round < plan.rounds; ++round) {
    int partner = patterns::recursive_doubling_partner(rank, round);
    auto range = [&](int member) {
      auto first =
          static_cast<std::size_t>(patterns::recursive_doubling_group_start(member, round));
      return element_at(args.recv, first * args.count, args.dtype);
    };
    std::size_t bytes = bytes_of((std::size_t{1} << round) * args.count, args.dtype);
    requests.exchange(partner, range(rank), bytes, partner, range(partner), bytes);
  }
}

}  // namespace chorus::algorithms
