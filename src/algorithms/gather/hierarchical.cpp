// Two-level gather (two_level.hpp): every host gathers its ranks' blocks to its leader
// along a binomial tree (the root leads its own host), then every other leader sends its
// host's bundle to the root in one message, and the root puts the blocks in rank order.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx, args.root);
  const HostGroups& groups = levels.groups();
  const bool root = ctx.rank() == args.root;
  const std::size_t n = static_cast<std::size_t>(ctx.size());
  Scratch bundles;  // leaders: their host's bundle; the root: every host's, host by host
  if (levels.leader()) {
    bundles = Scratch((root ? n : levels.members().size()) * args.count, args.dtype);
  }
  const std::size_t own = root ? groups.blocks_before(groups.host) * args.count : 0;
  Call phase = args;
  phase.root = 0;
  phase.recv = levels.leader() ? bundles.at(own) : nullptr;
  rows::gather_binomial.run(phase, levels.host());
  if (!levels.leader()) return;
  const Context leaders = levels.leaders();
  RequestSet requests(args, leaders);
  if (!root) {
    const int to = ctx.transport.topology().host_of_rank[static_cast<std::size_t>(args.root)];
    requests.send(to, bundles.data(), bytes_of(levels.members().size() * args.count, args.dtype));
    requests.wait();
    return;
  }
  for (int h = 0; h < levels.num_hosts(); ++h) {
    if (h == groups.host) continue;  // the root's own host: gathered above
    requests.recv(
        h, bundles.at(groups.blocks_before(h) * args.count),
        bytes_of(groups.hosts[static_cast<std::size_t>(h)].size() * args.count, args.dtype));
  }
  requests.wait();
  for (int h = 0; h < levels.num_hosts(); ++h) {
    unpack_blocks(args.recv, bundles.at(groups.blocks_before(h) * args.count),
                  groups.hosts[static_cast<std::size_t>(h)], args.count, args.dtype);
  }
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  return phase_cost(rows::gather_binomial, in, Collective::Gather, in.m(),
                    in.machine.max_ranks_per_host(), false) +
         bundles_cost(in, in.m());
}

}  // namespace

const Algorithm rows::gather_hierarchical{
    .name = "hierarchical",
    .description =
        "gather to each host's leader (the root leads its host), leaders send their "
        "bundles to the root",
    .collective = Collective::Gather,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
