// Two-level broadcast (two_level.hpp): the root, which leads its host, broadcasts to the
// other hosts' leaders along a binomial tree, then every leader broadcasts on its host
// along a k-nomial tree. Each host receives the message across the network once.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx, args.root);
  const bool root = ctx.rank() == args.root;
  Call phase = args;
  if (levels.leader() && levels.num_hosts() > 1) {
    const Topology& topology = ctx.transport.topology();
    phase.root = topology.host_of_rank[static_cast<std::size_t>(args.root)];
    rows::broadcast_binomial.run(phase, levels.leaders());
  }
  phase.root = 0;
  phase.send = levels.leader() ? (root ? args.send : args.recv) : nullptr;
  rows::broadcast_knomial.run(phase, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const double m = in.m();
  return phase_cost(rows::broadcast_binomial, in, Collective::Broadcast, m, in.machine.num_hosts(),
                    true) +
         phase_cost(rows::broadcast_knomial, in, Collective::Broadcast, m,
                    in.machine.max_ranks_per_host(), false);
}

}  // namespace

const Algorithm rows::broadcast_hierarchical{
    .name = "hierarchical",
    .description =
        "binomial tree among host leaders (the root leads its host), then k-nomial "
        "on each host",
    .collective = Collective::Broadcast,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
