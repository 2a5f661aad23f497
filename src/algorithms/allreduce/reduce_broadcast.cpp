// All-reduce = binomial reduce to rank 0 + binomial broadcast from rank 0.
//
// The reduce leaves the full result in rank 0's `recv`; broadcasting that
// buffer in place hands it to everyone. 2 ceil(log2 n) steps of the full
// buffer; simple and exact about who reduces what (one tree, one order), which
// makes it a reference for the faster algorithms.
//
// Both halves run under this call's fingerprint. That is safe because messages
// between a pair arrive in the order they were posted and both sides post the
// reduce's messages before the broadcast's.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  Call reduce_args = args;
  reduce_args.root = 0;
  rows::reduce_binomial.run(reduce_args, ctx);
  Call broadcast_args = args;
  broadcast_args.root = 0;
  broadcast_args.send = args.recv;
  rows::broadcast_binomial.run(broadcast_args, ctx);
}

double cost(const CostInput& in) {
  // The root receives lg messages: one from a leaf (unreduced input), the others partial
  // results (twice the bytes for half types); the broadcast moves the final values.
  const Shape s = in.shape();
  const double m = in.m();
  const double partials = std::max(s.lg - 1, 0.0) * m;
  return message_cost(in, {2 * s.lg, 2 * s.lg * m + in.extra_partial_bytes(partials), s.lg * m});
}

}  // namespace

const Algorithm rows::allreduce_reduce_broadcast{
    .name = "reduce_broadcast",
    .description = "binomial reduce to rank 0, then binomial broadcast",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
