// Rabenseifner's all-reduce: reduce-scatter by recursive halving, then
// all-gather by recursive doubling.
//
// On p = 2^m ranks the buffer is cut into p groups. Halving round j sends half
// of the current window (n / 2^(j+1) groups' worth) and reduces the other half,
// so the reduce-scatter moves (1/2 + 1/4 + ... ) = (p - 1)/p of the buffer in
// log2 p rounds and leaves rank r with group r reduced; the all-gather moves
// the same volume back in log2 p rounds. Total: 2 log2 p latencies and
// 2 (p - 1)/p of the buffer, i.e. the ring's volume with the tree's latency.
//
// A non-power of two n = p + e folds the e extra ranks in first, as MPICH
// does: extra rank p + i sends its whole input to core rank i, which reduces
// it into its own, and gets the result back at the end
// (patterns/recursive_doubling.hpp). The extras cost one more buffer transfer
// each way.
//
// Half types: the halving rounds carry partial sums in fp32 (algorithms/partials.hpp; round
// 0 of a power of two sends unreduced input in the half type); each rank rounds its own
// group once, then the doubling rounds move final half values.
#include "algorithms/allreduce/fold.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "core/reduce.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int rank = ctx.rank();
  const auto plan = patterns::recursive_doubling(rank, ctx.size());
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, ctx.size());
  RequestSet requests(args, ctx);
  // The halving pass works in recv itself when partials have the caller's dtype.
  Scratch own_work(partial == args.dtype ? 0 : args.count, partial);
  void* work = partial == args.dtype ? args.recv : own_work.data();
  const void* input = args.send;  // a power of two halves the unreduced input
  if (plan.core_size != ctx.size()) {
    if (fold_in_extra_rank(requests, args, plan, work, partial)) return;
    input = nullptr;
  }
  const CoreGroups groups{args.count, 1, plan.core_size};
  halving_reduce_scatter_pass(args, ctx, input, work, groups);
  const auto own = groups.span(rank, 1);
  store_final(element_at(args.recv, own.offset, args.dtype), element_at(work, own.offset, partial),
              own.count, args, divisor);
  doubling_allgather_pass(args, ctx, args.recv, groups);
  fold_out_extra_rank(requests, args, plan);
}

double cost(const CostInput& in) {
  // Halving: the first exchange sends half the unreduced input, the later ones partial
  // results (twice the bytes for half types); doubling moves final values; extras fold.
  const Shape s = in.shape();
  const double m = in.m();
  const double half = (s.p - 1) / s.p * m;
  const double partials = std::max(half - m / 2, 0.0);
  return spread_cost(
      in, {2 * s.log2p + 2 * s.f, 2 * half + 2 * s.f * m + in.extra_partial_bytes(partials),
           half + s.f * m});
}

}  // namespace

const Algorithm rows::allreduce_rabenseifner{
    .name = "rabenseifner",
    .description =
        "reduce-scatter by recursive halving, all-gather by recursive doubling; extras fold",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
