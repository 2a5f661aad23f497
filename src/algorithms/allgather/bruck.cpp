// Bruck all-gather: ceil(log2 n) rounds for any rank count.
//
// Rank r gathers into a work buffer whose slot i holds the block of rank
// r + i (mod n), starting with its own in slot 0. In round k (s = 2^k) it sends
// its first min(s, n - s) slots to r - s and receives the same number from
// r + s into slots [s, ...): the first slots of r + s are the blocks of
// r + s, r + s + 1, ... (patterns/bruck.hpp). After the last round every slot
// is filled; one rotation puts block i at rank i's place in `recv`.
//
// Rounds: ceil(log2 n) latencies, volume (n - 1) blocks like the ring, plus a
// local copy: the small-message all-gather for rank counts that are not powers
// of two (recursive doubling needs one).
#include "algorithms/patterns/bruck.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  Scratch work(static_cast<std::size_t>(n) * args.count, args.dtype);
  copy_elements(work.data(), args.send, args.count, args.dtype);
  RequestSet requests(args, ctx);
  for (int round = 0; round < patterns::bruck_rounds(n); ++round) {
    auto step = patterns::bruck_allgather_round(rank, n, round);
    std::size_t bytes = bytes_of(static_cast<std::size_t>(step.blocks) * args.count, args.dtype);
    requests.exchange(step.partners.send_to, work.data(), bytes, step.partners.recv_from,
                      work.at(static_cast<std::size_t>(1 << round) * args.count), bytes);
  }
  rotate_blocks(args.recv, work.data(), patterns::wrap(n - rank, n), n, args.count, args.dtype);
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return spread_cost(in, {s.lg, (s.n - 1) * m, 2 * s.n * m});
}

}  // namespace

const Algorithm rows::allgather_bruck{
    .name = "bruck",
    .description = "ceil(log2 n) rounds of doubling prefixes, any rank count",
    .collective = Collective::AllGather,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
