// Reduce-scatter by recursive halving, any rank count.
//
// The n blocks of the input (args.count elements each) are split among the
// p = 2^m core ranks as p groups of whole blocks (patterns::block_of(n, p, g):
// one or two blocks per group when n < 2p). Extra ranks p + i first send their
// whole input to core rank i, which folds it into a working copy of its own.
// The halving pass (halving.cpp) then leaves core rank g with group g reduced
// over everyone, in log2 p rounds moving (p - 1)/p of the input. Finally each
// block goes to its rank: block b lives at core rank block_owner(n, p, b), so
// every rank knows whom to receive its block from.
//
// Cost: log2 p rounds + 2 fold steps when n is not a power of two, where the
// ring needs n - 1 rounds.
//
// Half types: the fold and the halving rounds carry partial sums in fp32
// (algorithms/partials.hpp; unreduced input travels in the half type), and each block is
// rounded once, by its core rank, before it goes to its owner.
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "core/reduce.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const auto plan = patterns::recursive_doubling(rank, n);
  const std::size_t total = static_cast<std::size_t>(n) * args.count;
  const std::size_t block_bytes = bytes_of(args.count, args.dtype);
  const int owner = patterns::block_owner(static_cast<std::size_t>(n), plan.core_size,
                                          static_cast<std::size_t>(rank));
  RequestSet requests(args, ctx);
  if (plan.is_extra) {
    requests.send(plan.fold_partner, args.send, bytes_of(total, args.dtype));
    requests.wait();
    requests.recv(owner, args.recv, block_bytes);
    requests.wait();
    return;
  }
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  Scratch work(total, partial);
  const void* input = args.send;  // a power of two halves the unreduced input
  if (plan.core_size != n) {
    input = nullptr;
    if (plan.fold_partner < 0) convert(args.send, args.dtype, work.data(), partial, total);
  }
  if (plan.fold_partner >= 0) {
    Scratch incoming(total, args.dtype);
    requests.recv(plan.fold_partner, incoming.data(), bytes_of(total, args.dtype));
    requests.wait();
    reduce_operands(work.data(), partial, {args.send, args.dtype}, {incoming.data(), args.dtype},
                    total, args.op);
  }
  const CoreGroups groups{static_cast<std::size_t>(n), args.count, plan.core_size};
  halving_reduce_scatter_pass(args, ctx, input, work.data(), groups);
  // This rank's blocks, final: rounded (and divided) once, into `finals` for the peers.
  auto mine = patterns::block_of(static_cast<std::size_t>(n), plan.core_size, rank);
  const bool rounds = partial != args.dtype;
  Scratch finals(rounds ? mine.count * args.count : 0, args.dtype);
  for (std::size_t b = mine.offset; b < mine.offset + mine.count; ++b) {
    void* result = static_cast<int>(b) == rank ? args.recv
                   : rounds                    ? finals.at((b - mine.offset) * args.count)
                                               : work.at(b * args.count);
    store_final(result, work.at(b * args.count), args.count, args, divisor);
    if (static_cast<int>(b) != rank) requests.send(static_cast<int>(b), result, block_bytes);
  }
  if (owner != rank) requests.recv(owner, args.recv, block_bytes);
  requests.wait();
}

double cost(const CostInput& in) {
  // The first exchange sends half the unreduced input, the later ones partial results (twice
  // the bytes for half types); the extra ranks of a non-power of two fold in and get their
  // block.
  const Shape s = in.shape();
  const double m = in.m();
  const double total = s.n * m;
  const double half = (s.p - 1) / s.p * total;
  const double partials = std::max(half - total / 2, 0.0);
  return spread_cost(
      in, {s.log2p + 2 * s.f, half + s.f * (total + m) + in.extra_partial_bytes(partials),
           half + (1 + s.f) * total});
}

}  // namespace

const Algorithm rows::reduce_scatter_recursive_halving{
    .name = "recursive_halving",
    .description = "log2 n halving exchanges; extra ranks fold in first",
    .collective = Collective::ReduceScatter,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
