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
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/hierarchy.hpp"
#include "algorithms/subset_transport.hpp"
#include "algorithms/two_level.hpp"

#include <bit>
#include <limits>

namespace chorus::algorithms {
namespace {

constexpr std::size_t kLeaderLargeBytes = 64 * 1024;

/// The leaders' algorithm for a message of `bytes` among `leaders` hosts.
const Algorithm& leader_algorithm(std::size_t bytes, int leaders) {
  if (bytes < kLeaderLargeBytes) return rows::allreduce_recursive_doubling;
  return std::has_single_bit(static_cast<unsigned>(leaders)) ? rows::allreduce_rabenseifner
                                                             : rows::allreduce_ring;
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const Topology& topology = ctx.transport.topology();
  const int rank = ctx.rank();
  SubsetTransport host(
      ctx.transport,
      patterns::host_members(topology, topology.host_of_rank[static_cast<std::size_t>(rank)]));
  Call phase = args;
  phase.root = 0;
  phase.collective = Collective::Reduce;
  rows::reduce_knomial.run(phase, ctx.on(host));
  const bool leader = host.rank() == 0;
  if (leader && topology.num_hosts > 1) {
    SubsetTransport leaders(ctx.transport, patterns::host_leaders(topology));
    phase.collective = Collective::AllReduce;
    phase.send = args.recv;
    leader_algorithm(bytes_of(args.count, args.dtype), leaders.size()).run(phase, ctx.on(leaders));
  }
  phase.collective = Collective::Broadcast;
  phase.send = leader ? args.recv : nullptr;
  rows::broadcast_knomial.run(phase, ctx.on(host));
}

// Within each host a k-nomial reduce, then a broadcast; the leaders' algorithm over tcp.
// One host, or one rank per host: it degenerates to a flat algorithm; left to those.
double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const int per_host = in.machine.max_ranks_per_host();
  const int hosts = in.machine.num_hosts();
  const double m = in.m();
  return phase_cost(rows::reduce_knomial, in, Collective::Reduce, m, per_host, false) +
         phase_cost(leader_algorithm(in.bytes, hosts), in, Collective::AllReduce, m, hosts, true) +
         phase_cost(rows::broadcast_knomial, in, Collective::Broadcast, m, per_host, false);
}

}  // namespace

const Algorithm rows::allreduce_hierarchical{
    .name = "hierarchical",
    .description = "k-nomial reduce to each host's leader, leaders all-reduce, broadcast",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
