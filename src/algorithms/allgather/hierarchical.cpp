// Two-level all-gather (two_level.hpp): every host gathers its ranks' blocks to its leader
// (binomial tree), the leaders send their host's bundle straight to every other leader,
// each leader puts the bundles in rank order in `recv`, and broadcasts it on its host
// (k-nomial tree). Each host's blocks cross the network once per other host, in one message.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx);
  const HostGroups& groups = levels.groups();
  const std::size_t n = static_cast<std::size_t>(ctx.size());
  Scratch bundles;  // leaders: every host's bundle, host by host
  if (levels.leader()) bundles = Scratch(n * args.count, args.dtype);
  Call phase = args;
  phase.root = 0;
  phase.collective = Collective::Gather;
  phase.recv =
      levels.leader() ? bundles.at(groups.blocks_before(groups.host) * args.count) : nullptr;
  rows::gather_binomial.run(phase, levels.host());
  if (levels.leader()) {
    const Context leaders = levels.leaders();
    RequestSet requests(args, leaders);
    const int hosts = levels.num_hosts();
    const std::size_t mine = groups.hosts[static_cast<std::size_t>(groups.host)].size();
    for (int h = 0; h < hosts; ++h) {
      if (h == groups.host) continue;
      const std::size_t theirs = groups.hosts[static_cast<std::size_t>(h)].size();
      requests.recv(h, bundles.at(groups.blocks_before(h) * args.count),
                    bytes_of(theirs * args.count, args.dtype));
      requests.send(h, phase.recv, bytes_of(mine * args.count, args.dtype));
    }
    requests.wait();
    for (int h = 0; h < hosts; ++h) {
      unpack_blocks(args.recv, bundles.at(groups.blocks_before(h) * args.count),
                    groups.hosts[static_cast<std::size_t>(h)], args.count, args.dtype);
    }
  }
  phase.collective = Collective::Broadcast;
  phase.count = n * args.count;
  phase.send = levels.leader() ? args.recv : nullptr;
  phase.recv = args.recv;
  rows::broadcast_knomial.run(phase, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const int per_host = in.machine.max_ranks_per_host();
  const double m = in.m();
  const double n = in.machine.nranks;
  return phase_cost(rows::gather_binomial, in, Collective::Gather, m, per_host, false) +
         bundles_cost(in, m) +
         phase_cost(rows::broadcast_knomial, in, Collective::Broadcast, n * m, per_host, false);
}

}  // namespace

const Algorithm rows::allgather_hierarchical{
    .name = "hierarchical",
    .description = "gather to each host's leader, leaders exchange bundles, broadcast on hosts",
    .collective = Collective::AllGather,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
