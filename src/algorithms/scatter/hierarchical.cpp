// Two-level scatter (two_level.hpp): the root, which leads its host, sends every other
// host's bundle of blocks to that host's leader in one message, then every leader scatters
// its bundle on its host along a binomial tree.
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
  Scratch bundles;  // the root: every host's bundle, host by host; other leaders: their host's
  const std::byte* mine = nullptr;
  if (levels.leader()) {
    const Context leaders = levels.leaders();
    RequestSet requests(args, leaders);
    if (root) {
      bundles = Scratch(n * args.count, args.dtype);
      for (int h = 0; h < levels.num_hosts(); ++h) {
        const auto& members = groups.hosts[static_cast<std::size_t>(h)];
        std::byte* bundle = bundles.at(groups.blocks_before(h) * args.count);
        pack_blocks(bundle, args.send, members, args.count, args.dtype);
        if (h != groups.host) {
          requests.send(h, bundle, bytes_of(members.size() * args.count, args.dtype));
        }
      }
      mine = bundles.at(groups.blocks_before(groups.host) * args.count);
    } else {
      const std::size_t blocks = levels.members().size();
      bundles = Scratch(blocks * args.count, args.dtype);
      const int from = ctx.transport.topology().host_of_rank[static_cast<std::size_t>(args.root)];
      requests.recv(from, bundles.data(), bytes_of(blocks * args.count, args.dtype));
      mine = bundles.data();
    }
    requests.wait();
  }
  Call phase = args;
  phase.root = 0;
  phase.send = mine;
  rows::scatter_binomial.run(phase, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  return bundles_cost(in, in.m()) + phase_cost(rows::scatter_binomial, in, Collective::Scatter,
                                               in.m(), in.machine.max_ranks_per_host(), false);
}

}  // namespace

const Algorithm rows::scatter_hierarchical{
    .name = "hierarchical",
    .description =
        "the root (leading its host) sends each host's bundle to its leader, "
        "leaders scatter on their hosts",
    .collective = Collective::Scatter,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
