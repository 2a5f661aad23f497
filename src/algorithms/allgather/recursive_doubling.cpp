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

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

#include <chorus/error.hpp>

#include <bit>
#include <string>

namespace chorus::algorithms {

bool accepts_power_of_two(const Call&, int nranks) {
  return std::has_single_bit(static_cast<unsigned>(nranks));
}

namespace {

void run(const Call& args, const Context& ctx) {
  if (!accepts_power_of_two(args, ctx.size())) {
    throw Error(Status::InvalidUsage,
                "allgather recursive_doubling needs a power-of-two rank "
                "count, not " +
                    std::to_string(ctx.size()));
  }
  if (finish_trivial_call(args, ctx)) return;
  const int rank = ctx.rank();
  copy_elements(element_at(args.recv, static_cast<std::size_t>(rank) * args.count, args.dtype),
                args.send, args.count, args.dtype);
  const auto plan = patterns::recursive_doubling(rank, ctx.size());
  RequestSet requests(args, ctx);
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

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return spread_cost(in, {s.log2p, (s.n - 1) * m, m});
}

}  // namespace

const Algorithm rows::allgather_recursive_doubling{
    .name = "recursive_doubling",
    .description = "log2 n exchanges of doubling ranges; powers of two only",
    .collective = Collective::AllGather,
    .cost = cost,
    .run = runs<run>,
    .accepts = accepts_power_of_two};

}  // namespace chorus::algorithms
