// Ring all-gather.
//
// Every rank starts with its own block. In n - 1 steps each rank forwards to
// its successor the block it received in the previous step (its own at step
// 0) and receives a new one from its predecessor (patterns::allgather_step).
// A block written by rank b reaches b+1, b+2, ... one hop per step, so after
// n - 1 steps every rank holds every block; each rank sends (n - 1)/n of the
// result, which is bandwidth-optimal.
#include "algorithms/patterns/ring.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"

namespace chorus::algorithms {

void ring_allgather_pass(const Call& args, const Context& ctx, void* buffer, std::size_t total) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  RequestSet requests(args, ctx);
  for (int step = 0; step < n - 1; ++step) {
    auto blocks = patterns::allgather_step(rank, n, step);
    auto sent = patterns::block_of(total, n, blocks.send_block);
    auto received = patterns::block_of(total, n, blocks.recv_block);
    requests.exchange(patterns::ring_next(rank, n), element_at(buffer, sent.offset, args.dtype),
                      bytes_of(sent.count, args.dtype), patterns::ring_prev(rank, n),
                      element_at(buffer, received.offset, args.dtype),
                      bytes_of(received.count, args.dtype));
  }
}

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto n = static_cast<std::size_t>(ctx.size());
  const auto rank = static_cast<std::size_t>(ctx.rank());
  copy_elements(element_at(args.recv, rank * args.count, args.dtype), args.send, args.count,
                args.dtype);
  ring_allgather_pass(args, ctx, args.recv, n * args.count);
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return message_cost(in, {s.n - 1, (s.n - 1) * m, m});
}

}  // namespace

const Algorithm rows::allgather_ring{.name = "ring",
                                     .description = "n - 1 ring steps, one block each",
                                     .collective = Collective::AllGather,
                                     .cost = cost,
                                     .run = runs<run>};

}  // namespace chorus::algorithms
