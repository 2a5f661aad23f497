// Pairwise-exchange all-to-all-v: the all-to-all schedule with per-peer
// counts and displacements (in elements).
//
// At step k in [1, n) rank r sends send_counts[r + k] elements from
// send_displs[r + k] and receives recv_counts[r - k] elements at
// recv_displs[r - k] (patterns/pairwise.hpp). Blocks of zero elements still
// travel as empty messages: a peer that disagrees about a count then fails
// with a mismatch instead of pairing later messages wrongly.
//
// With send == recv the input is snapshotted first (its extent is the largest
// send_displs[p] + send_counts[p]), so receives cannot overwrite unsent data.
#include "algorithms/patterns/pairwise.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void alltoallv_pairwise(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  Scratch snapshot;
  const void* source = alltoallv_input(args, &snapshot);
  copy_alltoallv_self_block(args, rank, source);
  RequestSet requests(transport, args);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    auto to = static_cast<std::size_t>(peers.send_to);
    auto from = static_cast<std::size_t>(peers.recv_from);
    requests.exchange(peers.send_to, element_at(source, args.send_displs[to], args.dtype),
                      bytes_of(args.send_counts[to], args.dtype), peers.recv_from,
                      element_at(args.recv, args.recv_displs[from], args.dtype),
                      bytes_of(args.recv_counts[from], args.dtype));
  }
}

}  // namespace chorus::algorithms
