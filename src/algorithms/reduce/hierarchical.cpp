// Two-level reduce (two_level.hpp): every host reduces to its leader along a k-nomial tree
// (the root leads its own host), then the leaders reduce to the root along a binomial tree.
// Leaders other than the root hold their host's partial result in scratch.
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
  Scratch partial;
  void* host_result = args.recv;
  if (levels.leader() && !root) {
    partial = Scratch(args.count, args.dtype);
    host_result = partial.data();
  }
  Call phase = args;
  phase.root = 0;
  phase.recv = levels.leader() ? host_result : nullptr;
  rows::reduce_knomial.run(phase, levels.host());
  if (!levels.leader() || levels.num_hosts() == 1) return;
  const Topology& topology = ctx.transport.topology();
  phase.root = topology.host_of_rank[static_cast<std::size_t>(args.root)];
  phase.send = host_result;
  phase.recv = root ? args.recv : nullptr;
  rows::reduce_binomial.run(phase, levels.leaders());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const double m = in.m();
  return phase_cost(rows::reduce_knomial, in, Collective::Reduce, m,
                    in.machine.max_ranks_per_host(), false) +
         phase_cost(rows::reduce_binomial, in, Collective::Reduce, m, in.machine.num_hosts(), true);
}

}  // namespace

const Algorithm rows::reduce_hierarchical{
    .name = "hierarchical",
    .description =
        "k-nomial reduce on each host (the root leads its host), then binomial "
        "among host leaders",
    .collective = Collective::Reduce,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
