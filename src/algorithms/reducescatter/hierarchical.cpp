// Two-level reduce-scatter (two_level.hpp): every host reduces the whole input to its
// leader (k-nomial tree), each leader sends every other leader the bundle of that host's
// blocks and folds the bundles it receives into its own, then scatters its bundle on its
// host (binomial tree). Each host's share crosses the network once per other host.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"
#include "core/reduce.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

/// Leaders: sends every other leader its host's bundle of `packed` (every host's bundle,
/// host by host) and folds what they send into this host's bundle.
void exchange_and_fold(const Call& args, const TwoLevel& levels, std::byte* packed) {
  const HostGroups& groups = levels.groups();
  const std::size_t mine = levels.members().size() * args.count;
  const int hosts = levels.num_hosts();
  Scratch received(mine * static_cast<std::size_t>(hosts - 1), args.dtype);
  const Context leaders = levels.leaders();
  RequestSet requests(args, leaders);
  std::size_t slot = 0;
  for (int h = 0; h < hosts; ++h) {
    if (h == groups.host) continue;
    requests.recv(h, received.at(slot++ * mine), bytes_of(mine, args.dtype));
    requests.send(
        h, packed + bytes_of(groups.blocks_before(h) * args.count, args.dtype),
        bytes_of(groups.hosts[static_cast<std::size_t>(h)].size() * args.count, args.dtype));
  }
  requests.wait();
  std::byte* own = packed + bytes_of(groups.blocks_before(groups.host) * args.count, args.dtype);
  for (std::size_t i = 0; i < slot; ++i) {
    reduce_inplace(own, received.at(i * mine), mine, args.dtype, args.op);
  }
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx);
  const HostGroups& groups = levels.groups();
  const std::size_t n = static_cast<std::size_t>(ctx.size());
  Scratch sum, packed;  // leaders: the host's sum in rank order, then host by host
  Call phase = args;
  phase.root = 0;
  phase.collective = Collective::Reduce;
  phase.count = n * args.count;
  if (levels.leader()) sum = Scratch(n * args.count, args.dtype);
  phase.recv = levels.leader() ? sum.data() : nullptr;
  rows::reduce_knomial.run(phase, levels.host());
  const std::byte* mine = nullptr;
  if (levels.leader()) {
    packed = Scratch(n * args.count, args.dtype);
    for (int h = 0; h < levels.num_hosts(); ++h) {
      pack_blocks(packed.at(groups.blocks_before(h) * args.count), sum.data(),
                  groups.hosts[static_cast<std::size_t>(h)], args.count, args.dtype);
    }
    if (levels.num_hosts() > 1) exchange_and_fold(args, levels, packed.data());
    mine = packed.at(groups.blocks_before(groups.host) * args.count);
  }
  phase.collective = Collective::Scatter;
  phase.count = args.count;
  phase.send = mine;
  phase.recv = args.recv;
  rows::scatter_binomial.run(phase, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const int per_host = in.machine.max_ranks_per_host();
  const double m = in.m();
  const double n = in.machine.nranks;
  // The bundles from the other hosts are folded into this host's as they arrive.
  const double folded = (n - n / in.machine.num_hosts()) * m * in.parameters.gamma;
  return phase_cost(rows::reduce_knomial, in, Collective::Reduce, n * m, per_host, false) +
         bundles_cost(in, m) + folded +
         phase_cost(rows::scatter_binomial, in, Collective::Scatter, m, per_host, false);
}

}  // namespace

const Algorithm rows::reduce_scatter_hierarchical{
    .name = "hierarchical",
    .description =
        "reduce to each host's leader, leaders exchange and fold host bundles, "
        "scatter on hosts",
    .collective = Collective::ReduceScatter,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
