// Pairwise-exchange all-to-all.
//
// At step k in [1, n) rank r sends block (r + k) mod n of `send` to that rank
// and receives from rank (r - k) mod n into that rank's slot of `recv`
// (patterns/pairwise.hpp): every ordered pair meets exactly once, and each
// rank has one send and one receive in flight per step, so no rank is flooded.
// Its own block is a local copy.
//
// In place (send == recv) a slot may be overwritten before its block has been
// sent (slot r - k is sent at step n - k), so the input is snapshotted first.
#include "algorithms/patterns/pairwise.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  auto slot = [&](auto* base, int peer) {
    return element_at(base, static_cast<std::size_t>(peer) * args.count, args.dtype);
  };
  const void* source = args.send;
  Scratch snapshot;
  if (args.send == args.recv) {
    snapshot = Scratch(static_cast<std::size_t>(n) * args.count, args.dtype);
    copy_elements(snapshot.data(), args.send, static_cast<std::size_t>(n) * args.count, args.dtype);
    source = snapshot.data();
  }
  copy_elements(slot(args.recv, rank), slot(source, rank), args.count, args.dtype);
  RequestSet requests(args, ctx);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    requests.exchange(peers.send_to, slot(source, peers.send_to), bytes, peers.recv_from,
                      slot(args.recv, peers.recv_from), bytes);
  }
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return spread_cost(in, {s.n - 1, (s.n - 1) * m, m});
}

}  // namespace

const Algorithm rows::alltoall_pairwise{
    .name = "pairwise",
    .description = "n - 1 steps: send to r + k, receive from r - k",
    .collective = Collective::AllToAll,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
