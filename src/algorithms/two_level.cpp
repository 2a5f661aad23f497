// Host groups, stripes, views, bundles and phase costs of the two-level algorithms
// (two_level.hpp).
#include "algorithms/two_level.hpp"

#include "algorithms/common.hpp"
#include "algorithms/patterns/hierarchy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace chorus::algorithms {

std::vector<int> HostGroups::leaders() const {
  std::vector<int> leaders;
  leaders.reserve(hosts.size());
  for (const auto& members : hosts) leaders.push_back(members.front());
  return leaders;
}

std::size_t HostGroups::blocks_before(int h) const {
  std::size_t blocks = 0;
  for (int i = 0; i < h; ++i) blocks += hosts[static_cast<std::size_t>(i)].size();
  return blocks;
}

HostGroups host_groups(const Topology& topology, int rank, int root) {
  HostGroups groups;
  const int hosts = topology.num_hosts;
  groups.hosts.resize(static_cast<std::size_t>(hosts));
  for (int h = 0; h < hosts; ++h) {
    auto& members = groups.hosts[static_cast<std::size_t>(h)];
    members = patterns::host_members(topology, h);
    if (root >= 0 && topology.host_of_rank[static_cast<std::size_t>(root)] == h) {
      // The root leads its host: moved to the front, the others keep their order.
      auto at = std::find(members.begin(), members.end(), root);
      std::rotate(members.begin(), at, at + 1);
    }
  }
  for (int h = 0; h < hosts; ++h) {
    const auto& members = groups.hosts[static_cast<std::size_t>(h)];
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (members[i] != rank) continue;
      groups.host = h;
      groups.index = static_cast<int>(i);
    }
  }
  return groups;
}

namespace {

/// A topology of one rank per host when the transport reports none (a single process).
HostGroups groups_of(const Context& ctx, int root) {
  const Topology& topology = ctx.transport.topology();
  if (!topology.host_of_rank.empty()) return host_groups(topology, ctx.rank(), root);
  Topology one_host;
  one_host.host_of_rank.assign(static_cast<std::size_t>(ctx.size()), 0);
  one_host.num_hosts = 1;
  return host_groups(one_host, ctx.rank(), root);
}

}  // namespace

TwoLevel::TwoLevel(const Context& ctx, int root)
    : context_(ctx),
      groups_(groups_of(ctx, root)),
      host_(ctx.transport, groups_.hosts[static_cast<std::size_t>(groups_.host)]) {
  if (leader()) leaders_.emplace(ctx.transport, groups_.leaders());
}

bool stripes_fit(const Topology& topology) {
  if (topology.host_of_rank.empty() || topology.num_hosts < 2) return false;
  const int first = topology.ranks_on_host(0);
  for (int h = 1; h < topology.num_hosts; ++h) {
    if (topology.ranks_on_host(h) != first) return false;
  }
  return first > 1;
}

StripeGroups stripe_groups(const Topology& topology, int rank) {
  std::vector<std::vector<int>> hosts;
  for (int h = 0; h < topology.num_hosts; ++h) hosts.push_back(patterns::host_members(topology, h));
  const int host = topology.host_of_rank[static_cast<std::size_t>(rank)];
  StripeGroups groups;
  groups.host = hosts[static_cast<std::size_t>(host)];
  const auto place = static_cast<std::size_t>(
      std::find(groups.host.begin(), groups.host.end(), rank) - groups.host.begin());
  for (const auto& members : hosts) groups.column.push_back(members[place]);
  for (std::size_t i = 0; i < groups.host.size(); ++i) {
    for (const auto& members : hosts) groups.order.push_back(members[i]);
  }
  return groups;
}

Stripes::Stripes(const Context& ctx)
    : Stripes(ctx, stripe_groups(ctx.transport.topology(), ctx.rank())) {}

Stripes::Stripes(const Context& ctx, StripeGroups groups)
    : context_(ctx),
      order_(std::move(groups.order)),
      host_(ctx.transport, std::move(groups.host)),
      column_(ctx.transport, std::move(groups.column)) {}

const Algorithm* run_striped(void (*stripes)(const Call&, const Context&),
                             const Algorithm& leaders_form, const Call& args, const Context& ctx) {
  if (!stripes_fit(ctx.transport.topology())) return hand_over(leaders_form, args, ctx);
  if (!finish_trivial_call(args, ctx)) stripes(args, ctx);
  return nullptr;
}

void pack_blocks(void* bundle, const void* src, std::span<const int> ranks, std::size_t count,
                 DataType dtype) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    copy_elements(element_at(bundle, i * count, dtype),
                  element_at(src, static_cast<std::size_t>(ranks[i]) * count, dtype), count, dtype);
  }
}

void unpack_blocks(void* dst, const void* bundle, std::span<const int> ranks, std::size_t count,
                   DataType dtype) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    copy_elements(element_at(dst, static_cast<std::size_t>(ranks[i]) * count, dtype),
                  element_at(bundle, i * count, dtype), count, dtype);
  }
}

double phase_cost(const Algorithm& algorithm, const CostInput& in, Collective collective,
                  double bytes, int ranks, bool across_hosts) {
  if (ranks <= 1) return 0;
  Machine machine;
  machine.nranks = ranks;
  machine.local_shm = in.machine.local_shm;
  if (across_hosts) {
    machine.topology.num_hosts = ranks;
    for (int h = 0; h < ranks; ++h) machine.topology.host_of_rank.push_back(h);
  }
  const CostInput phase{collective,    static_cast<std::size_t>(std::llround(bytes)),
                        in.dtype,      in.op,
                        machine,       in.parameters,
                        in.chunk_bytes};
  return algorithm.cost(phase);
}

double column_cost(const Algorithm& algorithm, const CostInput& in, Collective collective,
                   double bytes) {
  CostParameters shared = in.parameters;
  shared.tcp.beta *= std::max(in.machine.max_ranks_per_host() / shared.tcp_links, 1.0);
  const CostInput column{in.collective, in.bytes, in.dtype,      in.op,
                         in.machine,    shared,   in.chunk_bytes};
  return phase_cost(algorithm, column, collective, bytes, in.machine.num_hosts(), true);
}

double stripes_cost(const CostInput& in, const Algorithm& on_hosts, const Algorithm& in_columns) {
  if (!stripes_fit(in.machine.topology)) return std::numeric_limits<double>::infinity();
  const double m = in.m();
  const double hosts = in.machine.num_hosts();
  return phase_cost(on_hosts, in, in.collective, hosts * m, in.machine.max_ranks_per_host(),
                    false) +
         column_cost(in_columns, in, in.collective, m) +
         in.machine.nranks * m * in.parameters.gamma;
}

double bundles_cost(const CostInput& in, double bytes_per_rank) {
  const double hosts = in.machine.num_hosts();
  const double n = in.machine.nranks;
  return in.parameters.tcp.time(hosts - 1, (n - n / hosts) * bytes_per_rank);
}

bool two_levels(const Machine& machine) {
  return machine.num_hosts() > 1 && machine.max_ranks_per_host() > 1;
}

}  // namespace chorus::algorithms
