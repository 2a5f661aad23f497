// Which ranks of a communicator share a host.
#pragma once

#include <vector>

namespace chorus {

struct Topology {
  std::vector<int> host_of_rank;  ///< host index per rank, numbered by first appearance
  int num_hosts = 1;

  bool same_host(int a, int b) const { return host_of_rank[a] == host_of_rank[b]; }
  int ranks_on_host(int host) const {
    int n = 0;
    for (int h : host_of_rank) n += (h == host);
    return n;
  }
};

}  // namespace chorus
