// Dissemination barrier.
//
// ceil(log2 n) rounds; in round k every rank sends an empty message to
// rank + 2^k and waits for the one from rank - 2^k (patterns/dissemination.hpp).
// A rank leaves only after hearing, directly or transitively, from every other
// rank, and every rank's first message is sent on entry, so no rank leaves
// before all have entered. The distances 2^k < n are distinct, so no ordered
// pair carries two messages of one barrier.
#include "algorithms/patterns/dissemination.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void barrier_dissemination(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  RequestSet requests(transport, args);
  for (int round = 0; round < patterns::dissemination_rounds(n); ++round) {
    auto peers = patterns::dissemination_partners(transport.rank(), n, round);
    requests.exchange(peers.send_to, nullptr, 0, peers.recv_from, nullptr, 0);
  }
}

}  // namespace chorus::algorithms
