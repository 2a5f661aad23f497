// Hierarchical all-reduce: within each host, across hosts, within each host.
//
// Using the communicator's Topology (patterns/hierarchy.hpp): (1) each host
// reduces to its leader, its lowest rank, along a k-nomial tree; (2) the
// leaders all-reduce among themselves — recursive doubling below
// kLeaderLargeBytes, above it Rabenseifner for a power-of-two number of hosts
// and the ring otherwise (no fold of extras); (3) each leader broadcasts the
// result along a k-nomial tree on its host. The phases run the flat
// algorithms on SubsetTransport views of the host's ranks and of the leaders.
//
// Only the leader phase crosses hosts: each host sends and receives about
// 2 (H - 1)/H of the buffer over the network once, instead of every rank doing
// so, and the host phases use the fast local links. With one host this is a
// reduce and a broadcast; with one rank per host it is the leader phase alone.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/hierarchy.hpp"
#include "algorithms/subset_transport.hpp"

#include <bit>

namespace chorus::algorithms {
namespace {

constexpr std::size_t kLeaderLargeBytes = 64 * 1024;

}  // namespace

void allreduce_hierarchical(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const Topology& topology = transport.topology();
  const int rank = transport.rank();
  SubsetTransport host(
      transport,
      patterns::host_members(topology, topology.host_of_rank[static_cast<std::size_t>(rank)]));
  CollectiveArgs phase = args;
  phase.root = 0;
  phase.collective = Collective::Reduce;
  reduce_knomial(host, phase);
  const bool leader = host.rank() == 0;
  if (leader && topology.num_hosts > 1) {
    SubsetTransport leaders(transport, patterns::host_leaders(topology));
    phase.collective = Collective::AllReduce;
    phase.send = args.recv;
    if (bytes_of(args.count, args.dtype) < kLeaderLargeBytes) {
      allreduce_recursive_doubling(leaders, phase);
    } else if (std::has_single_bit(static_cast<unsigned>(leaders.size()))) {
      allreduce_rabenseifner(leaders, phase);
    } else {
      allreduce_ring(leaders, phase);
    }
  }
  phase.collective = Collective::Broadcast;
  phase.send = leader ? args.recv : nullptr;
  broadcast_knomial(host, phase);
}

}  // namespace chorus::algorithms
