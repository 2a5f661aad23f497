// Hierarchical all-reduce: within each host, across hosts, within each host.
//
// Using the communicator's Topology (patterns/hierarchy.hpp), in one of two forms:
//
// Leaders (small calls, or hosts of different sizes): (1) each host reduces to its leader,
// its lowest rank, along a k-nomial tree; (2) the leaders all-reduce among themselves
// (leader_algorithm); (3) each leader broadcasts the result along a k-nomial tree on its
// host. Each host sends and receives about 2 (H - 1)/H of the buffer over the network
// once, instead of every rank doing so.
//
// Stripes (from kLeaderLargeBytes, every host holding P ranks): (1) a ring reduce-scatter
// on each host leaves its i-th rank block i of the host's sum; (2) the i-th ranks of all
// hosts (a column) all-reduce block i among themselves; (3) a ring all-gather on each host.
// The host's traffic crosses the network once as well, but in P streams from P ranks at
// once, and no rank carries the host phases alone: each moves (P - 1)/P of the buffer
// inside its host, where a leader moves all of it twice.
//
// The phases run the flat algorithms on SubsetTransport views of the host's ranks and of
// the leaders or a column. With one host this is a reduce and a broadcast; with one rank per
// host it is the leader phase alone.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/hierarchy.hpp"
#include "algorithms/subset_transport.hpp"
#include "algorithms/two_level.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

namespace chorus::algorithms {
namespace {

constexpr std::size_t kLeaderLargeBytes = 64 * 1024;

/// The leaders' algorithm for a message of `bytes` among `leaders` hosts.
const Algorithm& leader_algorithm(std::size_t bytes, int leaders) {
  if (bytes < kLeaderLargeBytes) return rows::allreduce_recursive_doubling;
  return std::has_single_bit(static_cast<unsigned>(leaders)) ? rows::allreduce_rabenseifner
                                                             : rows::allreduce_ring;
}

/// The stripes form for a call of `bytes` on `topology`.
bool striped(std::size_t bytes, const Topology& topology) {
  return bytes >= kLeaderLargeBytes && stripes_fit(topology);
}

void run_stripes(const Call& args, const Context& ctx) {
  const Stripes stripes(ctx);
  const patterns::Block own =
      patterns::block_of(args.count, stripes.ranks_per_host(), stripes.place());
  void* block = element_at(args.recv, own.offset, args.dtype);
  ring_reduce_scatter_pass(args, stripes.host(), args.send, args.count, block);
  Call phase = args;
  phase.send = block;
  phase.recv = block;
  phase.count = own.count;
  leader_algorithm(bytes_of(own.count, args.dtype), stripes.num_hosts())
      .run(phase, stripes.column());
  ring_allgather_pass(args, stripes.host(), args.recv, args.count);
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const Topology& topology = ctx.transport.topology();
  if (striped(bytes_of(args.count, args.dtype), topology)) return run_stripes(args, ctx);
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

// Stripes: a ring reduce-scatter and all-gather on each host; the P columns' algorithm over
// tcp, P blocks of m / P sharing the host's links (column_cost).
double stripes_cost(const CostInput& in) {
  const int per_host = in.machine.max_ranks_per_host();
  const double block = in.m() / per_host;
  const Algorithm& columns =
      leader_algorithm(static_cast<std::size_t>(block), in.machine.num_hosts());
  return phase_cost(rows::reduce_scatter_ring, in, Collective::ReduceScatter, block, per_host,
                    false) +
         column_cost(columns, in, Collective::AllReduce, block) +
         phase_cost(rows::allgather_ring, in, Collective::AllGather, block, per_host, false);
}

// Leaders: within each host a k-nomial reduce, then a broadcast; the leaders' algorithm over
// tcp. One host, or one rank per host: it degenerates to a flat algorithm; left to those.
double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  if (striped(in.bytes, in.machine.topology)) return stripes_cost(in);
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
    .description =
        "on each host reduce (to the leader, or ring reduce-scatter in stripes), "
        "across hosts all-reduce, on each host broadcast (or ring all-gather)",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
