// Host groups of a Topology for hierarchical algorithms (pure functions).
//
// The members of a host are its ranks in ascending order; the first is the
// host's leader. Leaders are listed by host index (hosts are numbered by first
// appearance, so leaders come out in ascending rank order too). Every rank
// computes the same lists from the same topology.
#pragma once

#include "core/topology.hpp"

#include <cstddef>
#include <vector>

namespace chorus::algorithms::patterns {

/// The ranks on `host`, ascending.
inline std::vector<int> host_members(const Topology& topology, int host) {
  std::vector<int> members;
  for (std::size_t r = 0; r < topology.host_of_rank.size(); ++r) {
    if (topology.host_of_rank[r] == host) members.push_back(static_cast<int>(r));
  }
  return members;
}

/// The lowest rank of each host, by host index.
inline std::vector<int> host_leaders(const Topology& topology) {
  std::vector<int> leaders(static_cast<std::size_t>(topology.num_hosts), -1);
  for (std::size_t r = topology.host_of_rank.size(); r-- > 0;) {
    leaders[static_cast<std::size_t>(topology.host_of_rank[r])] = static_cast<int>(r);
  }
  return leaders;
}

/// The largest number of ranks on one host.
inline int max_ranks_per_host(const Topology& topology) {
  int most = 0;
  for (int host = 0; host < topology.num_hosts; ++host) {
    int here = topology.ranks_on_host(host);
    most = here > most ? here : most;
  }
  return most;
}

}  // namespace chorus::algorithms::patterns
