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
//
// Half types: the running result is a partial sum until the last round, so it travels in
// fp32 (algorithms/partials.hpp) and is rounded once, by the last round's reduction; round
// 0 of a power of two sends the unreduced input, in the half type.
#include "algorithms/patterns/recursive_doubling.hpp"

#include "algorithms/allreduce/fold.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "core/reduce.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto plan = patterns::recursive_doubling(ctx.rank(), ctx.size());
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, ctx.size());
  RequestSet requests(args, ctx);
  // The running result: recv itself when partials have the caller's dtype.
  Scratch own_work(partial == args.dtype ? 0 : args.count, partial);
  void* work = partial == args.dtype ? args.recv : own_work.data();
  // A power of two starts from the unreduced input (in the caller's dtype); otherwise every
  // core rank starts from its input with its extra's folded in, a partial.
  Operand current{args.send, args.dtype};
  if (plan.core_size != ctx.size()) {
    if (fold_in_extra_rank(requests, args, plan, work, partial)) return;
    current = {work, partial};
  }
  Scratch incoming(args.count, partial);
  for (int round = 0; round < plan.rounds; ++round) {
    const int partner = patterns::recursive_doubling_partner(ctx.rank(), round);
    const std::size_t bytes = bytes_of(args.count, current.dtype);
    requests.exchange(partner, current.data, bytes, partner, incoming.data(), bytes);
    const Operand theirs{incoming.data(), current.dtype};
    if (round == plan.rounds - 1) {
      reduce_operands(args.recv, args.dtype, current, theirs, args.count, args.op, divisor);
    } else {
      reduce_operands(work, partial, current, theirs, args.count, args.op);
    }
    current = {work, partial};
  }
  fold_out_extra_rank(requests, args, plan);
}

double cost(const CostInput& in) {
  // The first exchange moves unreduced input, the later ones partial results (twice the bytes
  // for half types); the extra ranks of a non-power of two send their input and get the result.
  const Shape s = in.shape();
  const double m = in.m();
  const double partials = std::max(s.log2p - 1, 0.0) * m;
  return spread_cost(in,
                     {s.log2p + 2 * s.f, (s.log2p + 2 * s.f) * m + in.extra_partial_bytes(partials),
                      (s.log2p + s.f) * m});
}

}  // namespace

const Algorithm rows::allreduce_recursive_doubling{
    .name = "recursive_doubling",
    .description =
        "log2 n exchanges of the whole buffer; extra ranks of a non-power of two fold in",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
