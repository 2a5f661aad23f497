// Ring reduce-scatter.
//
// Cut the input into n blocks, one per rank. In n - 1 steps every rank passes
// one partially reduced block to its successor and folds the block arriving
// from its predecessor into its own contribution to that block
// (patterns::reduce_scatter_step derives the block indices). Block b starts at
// rank b + 1 and travels once around the ring, gaining one contribution per
// hop, so it reaches rank b after n - 1 hops with all n contributions. Each rank
// sends and receives (n - 1)/n of the data: bandwidth-optimal, latency n - 1.
//
// Partial sums live in two block-sized scratch buffers (the one being sent and
// the one being received), so the input is never written; only the final
// block goes to `out`, which in place is the rank's own input block (read for
// the last time in that same reduction).
//
// Half types: a block's partial sum gathers one contribution per hop, so it travels in
// fp32 (algorithms/partials.hpp) and only the owner rounds it, once, when it adds the last
// contribution; step 0 sends unreduced input, in the half type. At 2 ranks every message
// is a half type; at n ranks n - 2 of the n - 1 steps carry fp32.
#include "algorithms/patterns/ring.hpp"

#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "core/reduce.hpp"

#include <algorithm>

namespace chorus::algorithms {

using patterns::block_of;

void ring_reduce_scatter_pass(const Call& args, const Context& ctx, const void* contribution,
                              std::size_t total, void* out) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const DataType dtype = args.dtype;
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  const std::size_t largest = block_of(total, n, 0).count;
  Scratch outgoing(largest, partial), incoming(largest, partial);
  RequestSet requests(args, ctx);
  for (int step = 0; step < n - 1; ++step) {
    auto blocks = patterns::reduce_scatter_step(rank, n, step);
    auto sent = block_of(total, n, blocks.send_block);
    auto received = block_of(total, n, blocks.recv_block);
    // Step 0 moves unreduced input, in the caller's dtype; later steps partial results.
    const Operand sending{
        step == 0 ? element_at(contribution, sent.offset, dtype) : outgoing.data(),
        step == 0 ? dtype : partial};
    requests.exchange(patterns::ring_next(rank, n), sending.data,
                      bytes_of(sent.count, sending.dtype), patterns::ring_prev(rank, n),
                      incoming.data(), bytes_of(received.count, sending.dtype));
    const Operand mine{element_at(contribution, received.offset, dtype), dtype};
    const Operand arrived{incoming.data(), sending.dtype};
    // The outgoing buffer is free again (the exchange completed): the next partial goes there.
    if (step == n - 2) {
      reduce_operands(out, dtype, arrived, mine, received.count, args.op, divisor);
    } else {
      reduce_operands(outgoing.data(), partial, arrived, mine, received.count, args.op);
    }
  }
}

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto n = static_cast<std::size_t>(ctx.size());
  ring_reduce_scatter_pass(args, ctx, args.send, n * args.count, args.recv);
}

double cost(const CostInput& in) {
  // Step 0 sends unreduced input, the n - 2 later steps partial results (twice the bytes for
  // half types).
  const Shape s = in.shape();
  const double others = (s.n - 1) * in.m();
  const double partials = std::max(s.n - 2, 0.0) * in.m();
  return message_cost(in, {s.n - 1, others + in.extra_partial_bytes(partials), others});
}

}  // namespace

const Algorithm rows::reduce_scatter_ring{
    .name = "ring",
    .description = "n - 1 ring steps, one partially reduced block each",
    .collective = Collective::ReduceScatter,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
