// Recursive-doubling all-reduce.
//
// With p = 2^k ranks, round j pairs rank r with r ^ 2^j; both exchange their
// whole running result and reduce it with their own. Before round j a rank
// holds the reduction over its 2^j-aligned group, so after round j it holds the
// reduction over the 2^(j+1)-aligned group and after k rounds over all ranks:
// k steps of the full buffer, the latency-optimal choice for small buffers.
// Both partners compute a op b and b op a, which are equal (our ops commute
// exactly, also in floating point), so every rank ends bit-identical.
//
// A non-power-of-two n = p + e folds the e extra ranks in first (extra rank
// p + i sends its buffer to core rank i, which reduces it into its own), runs
// the rounds on the p core ranks, and folds out afterwards (core rank i sends
// the result back) — patterns/recursive_doubling.hpp.
#include "algorithms/patterns/recursive_doubling.hpp"

#include "algorithms/allreduce/fold.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

void allreduce_recursive_doubling(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const auto plan = patterns::recursive_doubling(transport.rank(), transport.size());
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(transport, args);
  if (fold_in_extra_rank(requests, args, plan)) return;
  Scratch incoming(args.count, args.dtype);
  for (int round = 0; round < plan.rounds; ++round) {
    int partner = patterns::recursive_doubling_partner(transport.rank(), round);
    requests.exchange(partner, args.recv, bytes, partner, incoming.data(), bytes);
    reduce_into(args.recv, args.recv, incoming.data(), args.count, args.dtype, args.op);
  }
  fold_out_extra_rank(requests, args, plan);
}

}  // namespace chorus::algorithms
