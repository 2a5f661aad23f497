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
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

void reduce_scatter_recursive_halving(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const auto plan = patterns::recursive_doubling(rank, n);
  const std::size_t total = static_cast<std::size_t>(n) * args.count;
  const std::size_t block_bytes = bytes_of(args.count, args.dtype);
  const int owner = patterns::block_owner(static_cast<std::size_t>(n), plan.core_size,
                                          static_cast<std::size_t>(rank));
  RequestSet requests(transport, args);
  if (plan.is_extra) {
    requests.send(plan.fold_partner, args.send, bytes_of(total, args.dtype));
    requests.wait();
    requests.recv(owner, args.recv, block_bytes);
    requests.wait();
    return;
  }
  Scratch work(total, args.dtype);
  copy_elements(work.data(), args.send, total, args.dtype);
  if (plan.fold_partner >= 0) {
    Scratch incoming(total, args.dtype);
    requests.recv(plan.fold_partner, incoming.data(), bytes_of(total, args.dtype));
    requests.wait();
    reduce_into(work.data(), work.data(), incoming.data(), total, args.dtype, args.op);
  }
  const CoreGroups groups{static_cast<std::size_t>(n), args.count, plan.core_size};
  halving_reduce_scatter_pass(transport, args, work.data(), groups);
  auto mine = patterns::block_of(static_cast<std::size_t>(n), plan.core_size, rank);
  for (std::size_t b = mine.offset; b < mine.offset + mine.count; ++b) {
    if (static_cast<int>(b) == rank) continue;
    requests.send(static_cast<int>(b), work.at(b * args.count), block_bytes);
  }
  if (owner == rank) {
    copy_elements(args.recv, work.at(static_cast<std::size_t>(rank) * args.count), args.count,
                  args.dtype);
  } else {
    requests.recv(owner, args.recv, block_bytes);
  }
  requests.wait();
}

}  // namespace chorus::algorithms
