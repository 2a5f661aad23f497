// Modelled seconds of the collectives a layout issues, from Chorus's own cost model
// (algorithms/cost_model.hpp): each call is costed as the communicator would select it
// (default_selection over the registered algorithms) on a machine of the group's shape, the
// ranks of one host over shm (the intra-host link), groups spanning hosts over tcp (the
// inter-host link). Results are remembered per (collective, bytes, ranks, hosts).
#pragma once

#include "algorithms/cost_model.hpp"
#include "core/collective.hpp"

#include <cstdint>
#include <map>
#include <tuple>

namespace chorus::plan {

/// Where a group's ranks sit: `ranks` in all, spread over `hosts` hosts (equal shares).
struct GroupShape {
  int ranks = 1;
  int hosts = 1;
};

/// The shape of a mesh group whose members are `stride` apart (rank i * stride, i < size) when
/// consecutive ranks fill hosts of `ranks_per_host` (PARALLEL.md's pp, dp, cp, tp order).
GroupShape group_shape(int stride, int size, int ranks_per_host);

class CollectiveCosts {
 public:
  explicit CollectiveCosts(const algorithms::CostParameters& parameters)
      : parameters_(parameters) {}

  /// `bytes`: the buffer of every rank (all-reduce), the whole gathered or scattered buffer
  /// (all-gather, reduce-scatter), or what a rank sends to all its peers together
  /// (all-to-all).
  double all_reduce(double bytes, GroupShape group);
  double reduce_scatter(double bytes, GroupShape group);
  double all_gather(double bytes, GroupShape group);
  double all_to_all(double bytes, GroupShape group);
  /// One message between two ranks, over the inter-host link when `across_hosts`.
  double send(double bytes, bool across_hosts) const;

  const algorithms::CostParameters& parameters() const { return parameters_; }

 private:
  double cost(Collective collective, double bytes, GroupShape group);

  algorithms::CostParameters parameters_;
  std::map<std::tuple<int, std::uint64_t, int, int>, double> memo_;
};

}  // namespace chorus::plan
