// Two-level all-to-all (two_level.hpp): every host gathers its ranks' whole send buffers to
// its leader (binomial tree); each leader sends every other leader, in one message, the
// blocks its host's ranks send to that host's ranks, and receives theirs; it then lays out
// every member's result in rank order and scatters them on its host (binomial tree). Many
// small blocks cross the network as a few large messages.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

#include <limits>

namespace chorus::algorithms {
namespace {

/// Leaders: the blocks every member of this host sends to the members of host `to`, member
/// by member (from `gathered`: each member's whole send buffer, member by member).
void pack_for_host(std::byte* out, const std::byte* gathered, const HostGroups& groups, int to,
                   std::size_t count, DataType dtype) {
  const std::size_t n = static_cast<std::size_t>(groups.num_ranks());
  const auto& receivers = groups.hosts[static_cast<std::size_t>(to)];
  const std::size_t senders = groups.hosts[static_cast<std::size_t>(groups.host)].size();
  for (std::size_t i = 0; i < senders; ++i) {
    pack_blocks(element_at(out, i * receivers.size() * count, dtype),
                element_at(gathered, i * n * count, dtype), receivers, count, dtype);
  }
}

/// Leaders: from the bundle host `from` sent (its members' blocks to this host's members,
/// sender by sender), the blocks go to each member's result (in rank order, member by member).
void unpack_from_host(std::byte* results, const std::byte* bundle, const HostGroups& groups,
                      int from, std::size_t count, DataType dtype) {
  const std::size_t n = static_cast<std::size_t>(groups.num_ranks());
  const auto& senders = groups.hosts[static_cast<std::size_t>(from)];
  const std::size_t receivers = groups.hosts[static_cast<std::size_t>(groups.host)].size();
  for (std::size_t i = 0; i < senders.size(); ++i) {
    const auto sender = static_cast<std::size_t>(senders[i]);
    for (std::size_t k = 0; k < receivers; ++k) {
      copy_elements(element_at(results, (k * n + sender) * count, dtype),
                    element_at(bundle, (i * receivers + k) * count, dtype), count, dtype);
    }
  }
}

void exchange(const Call& args, const TwoLevel& levels, const std::byte* gathered,
              std::byte* results) {
  const HostGroups& groups = levels.groups();
  const int hosts = levels.num_hosts();
  const std::size_t mine = levels.members().size();
  std::vector<Scratch> out(static_cast<std::size_t>(hosts)), in(static_cast<std::size_t>(hosts));
  const Context leaders = levels.leaders();
  RequestSet requests(args, leaders);
  for (int h = 0; h < hosts; ++h) {
    const std::size_t blocks = mine * groups.hosts[static_cast<std::size_t>(h)].size();
    auto& o = out[static_cast<std::size_t>(h)];
    auto& i = in[static_cast<std::size_t>(h)];
    o = Scratch(blocks * args.count, args.dtype);
    pack_for_host(o.data(), gathered, groups, h, args.count, args.dtype);
    if (h == groups.host) continue;
    i = Scratch(blocks * args.count, args.dtype);
    requests.recv(h, i.data(), bytes_of(blocks * args.count, args.dtype));
    requests.send(h, o.data(), bytes_of(blocks * args.count, args.dtype));
  }
  requests.wait();
  for (int h = 0; h < hosts; ++h) {
    Scratch& bundle =
        h == groups.host ? out[static_cast<std::size_t>(h)] : in[static_cast<std::size_t>(h)];
    unpack_from_host(results, bundle.data(), groups, h, args.count, args.dtype);
  }
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const TwoLevel levels(ctx);
  const std::size_t n = static_cast<std::size_t>(ctx.size());
  const std::size_t row = n * args.count;  // one rank's whole buffer
  Scratch gathered, results;               // leaders: member by member
  if (levels.leader()) {
    gathered = Scratch(levels.members().size() * row, args.dtype);
    results = Scratch(levels.members().size() * row, args.dtype);
  }
  Call phase = args;
  phase.root = 0;
  phase.count = row;
  phase.collective = Collective::Gather;
  phase.recv = levels.leader() ? gathered.data() : nullptr;
  rows::gather_binomial.run(phase, levels.host());
  if (levels.leader()) exchange(args, levels, gathered.data(), results.data());
  phase.collective = Collective::Scatter;
  phase.send = levels.leader() ? results.data() : nullptr;
  phase.recv = args.recv;
  rows::scatter_binomial.run(phase, levels.host());
}

double cost(const CostInput& in) {
  if (!two_levels(in.machine)) return std::numeric_limits<double>::infinity();
  const int per_host = in.machine.max_ranks_per_host();
  const double m = in.m();
  const double n = in.machine.nranks;
  const double local = n / in.machine.num_hosts();
  // Each rank elsewhere gets this host's ranks' blocks for it; every block is packed and
  // unpacked once by a leader.
  const double packing = 2 * local * n * m * in.parameters.gamma;
  return phase_cost(rows::gather_binomial, in, Collective::Gather, n * m, per_host, false) +
         bundles_cost(in, local * m) + packing +
         phase_cost(rows::scatter_binomial, in, Collective::Scatter, n * m, per_host, false);
}

}  // namespace

const Algorithm rows::alltoall_hierarchical{
    .name = "hierarchical",
    .description =
        "gather each host's buffers to its leader, leaders exchange host-to-host "
        "bundles, scatter on hosts",
    .collective = Collective::AllToAll,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
