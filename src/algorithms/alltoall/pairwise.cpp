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

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void alltoall_pairwise(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
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
  RequestSet requests(transport, args);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    requests.exchange(peers.send_to, slot(source, peers.send_to), bytes, peers.recv_from,
                      slot(args.recv, peers.recv_from), bytes);
  }
}

}  // namespace chorus::algorithms
