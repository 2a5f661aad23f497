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
  const Machine& machine = in.machine;
  const int per_host = machine.max_ranks_per_host();
  const int hosts = machine.num_hosts();
  if (hosts <= 1 || per_host <= 1) return std::numeric_limits<double>::infinity();
  const LinkCost& local = machine.local_shm ? in.parameters.shm : in.parameters.tcp;
  const double m = in.m();
  double seconds = terms_cost(knomial_terms(per_host, m, true), local, in.parameters.gamma) +
                   terms_cost(knomial_terms(per_host, m, false), local, in.parameters.gamma);
  // The leaders: one rank on each of `hosts` hosts.
  Machine leaders;
  leaders.nranks = hosts;
  leaders.topology.num_hosts = hosts;
  for (int h = 0; h < hosts; ++h) leaders.topology.host_of_rank.push_back(h);
  const CostInput leader_input{in.collective, in.bytes,      in.dtype,      in.op,
                               leaders,       in.parameters, in.chunk_bytes};
  return seconds + leader_algorithm(in.bytes, hosts).cost(leader_input);
}

}  // namespace

const Algorithm rows::allreduce_hierarchical{
    .name = "hierarchical",
    .description = "k-nomial reduce to each host's leader, leaders all-reduce, broadcast",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
