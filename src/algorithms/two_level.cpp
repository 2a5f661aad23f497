// Host groups, views, bundles and phase costs of the two-level algorithms (two_level.hpp).
#include "algorithms/two_level.hpp"

#include "algorithms/common.hpp"
#include "algorithms/patterns/hierarchy.hpp"

#include <algorithm>
#include <cmath>
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

double bundles_cost(const CostInput& in, double bytes_per_rank) {
  const double hosts = in.machine.num_hosts();
  const double n = in.machine.nranks;
  return in.parameters.tcp.time(hosts - 1, (n - n / hosts) * bytes_per_rank);
}

bool two_levels(const Machine& machine) {
  return machine.num_hosts() > 1 && machine.max_ranks_per_host() > 1;
}

}  // namespace chorus::algorithms
