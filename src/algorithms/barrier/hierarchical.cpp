// Two-level barrier (two_level.hpp): a dissemination barrier on every host, one among the
// host leaders, and one on every host again. No rank leaves the last before its leader
// entered it, which the leader does only after every leader's host had arrived.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx);
  rows::barrier_dissemination.run(args, levels.host());
  if (levels.leader() && levels.num_hosts() > 1) {
    rows::barrier_dissemination.run(args, levels.leaders());
  }
  rows::barrier_dissemination.run(args, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const int per_host = in.machine.max_ranks_per_host();
  return 2 * phase_cost(rows::barrier_dissemination, in, Collective::Barrier, 0, per_host, false) +
         phase_cost(rows::barrier_dissemination, in, Collective::Barrier, 0, in.machine.num_hosts(),
                    true);
}

}  // namespace

const Algorithm rows::barrier_hierarchical{
    .name = "hierarchical",
    .description = "dissemination on each host, among host leaders, and on each host again",
    .collective = Collective::Barrier,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
