// Collective costs of a layout's groups through the communicator's own selection
// (collective_costs.hpp).
#include "plan/collective_costs.hpp"

#include "algorithms/algorithm.hpp"
#include "algorithms/selection.hpp"

#include <algorithm>
#include <cmath>

namespace chorus::plan {
namespace {

constexpr double kElementBytes = 4;  // costed as fp32 elements

/// A machine of `group.ranks` ranks, `group.ranks / group.hosts` per host, consecutive.
algorithms::Machine machine_of(GroupShape group) {
  algorithms::Machine machine;
  machine.nranks = group.ranks;
  if (group.hosts > 1) {
    const int per_host = std::max(1, group.ranks / group.hosts);
    machine.topology.host_of_rank.resize(static_cast<std::size_t>(group.ranks));
    for (int rank = 0; rank < group.ranks; ++rank) {
      machine.topology.host_of_rank[static_cast<std::size_t>(rank)] =
          std::min(rank / per_host, group.hosts - 1);
    }
    machine.topology.num_hosts = group.hosts;
  }
  return machine;
}

/// The call's count in fp32 elements, as Call defines it per collective.
std::size_t count_of(Collective collective, double bytes, int ranks) {
  double elements = bytes / kElementBytes;
  if (collective != Collective::AllReduce) elements /= ranks;  // per rank or per peer
  return static_cast<std::size_t>(std::ceil(std::max(elements, 0.0)));
}

}  // namespace

GroupShape group_shape(int stride, int size, int ranks_per_host) {
  // Members i * stride from rank 0: a stride of a host or more puts each on its own host;
  // a shorter one fills hosts in turn, the last member on host (size - 1) * stride / R.
  if (stride >= ranks_per_host) return {size, size};
  const long long last = static_cast<long long>(size - 1) * stride;
  return {size, static_cast<int>(last / ranks_per_host) + 1};
}

double CollectiveCosts::cost(Collective collective, double bytes, GroupShape group) {
  if (group.ranks <= 1 || bytes <= 0) return 0;
  const auto key = std::make_tuple(static_cast<int>(collective), static_cast<std::uint64_t>(bytes),
                                   group.ranks, group.hosts);
  auto found = memo_.find(key);
  if (found != memo_.end()) return found->second;
  algorithms::SelectionContext context{machine_of(group), parameters_};
  algorithms::Call call;
  call.collective = collective;
  call.count = count_of(collective, bytes, group.ranks);
  call.dtype = DataType::Float32;
  call.op = ReduceOp::Sum;
  const algorithms::Needs provided =
      group.hosts == 1 ? algorithms::kNeedsArena : algorithms::kNeedsNothing;
  const double seconds = algorithms::default_selection(call, provided, context).modelled_seconds;
  memo_.emplace(key, seconds);
  return seconds;
}

double CollectiveCosts::all_reduce(double bytes, GroupShape group) {
  return cost(Collective::AllReduce, bytes, group);
}

double CollectiveCosts::reduce_scatter(double bytes, GroupShape group) {
  return cost(Collective::ReduceScatter, bytes, group);
}

double CollectiveCosts::all_gather(double bytes, GroupShape group) {
  return cost(Collective::AllGather, bytes, group);
}

double CollectiveCosts::all_to_all(double bytes, GroupShape group) {
  return cost(Collective::AllToAll, bytes, group);
}

double CollectiveCosts::send(double bytes, bool across_hosts) const {
  if (bytes <= 0) return 0;
  const algorithms::LinkCost& link = across_hosts ? parameters_.tcp : parameters_.shm;
  return link.time(1, bytes);
}

}  // namespace chorus::plan
