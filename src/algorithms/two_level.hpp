// What the two-level (hierarchical) algorithms share: the groups of a call (every host's
// ranks, each with its leader first), the views their phases run on (a host's ranks, the
// leaders), the packing of a host's blocks into one bundle, and the cost of one phase.
//
// A two-level call runs flat algorithms on SubsetTransport views: inside each host over
// the local links, then among one leader per host across hosts, then inside each host
// again, so only leaders send across hosts and each host's traffic crosses the network
// once, in a few large messages. A rooted call's root leads its own host (no extra hop);
// elsewhere a host's lowest rank leads.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/subset_transport.hpp"

#include <chorus/types.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace chorus::algorithms {

/// Every host's ranks, by host index (the Topology's numbering). Within a host the leader
/// comes first: the root on the root's host, else the host's lowest rank; then the other
/// ranks ascending. Every rank computes the same groups from the same topology.
struct HostGroups {
  std::vector<std::vector<int>> hosts;
  int host = 0;   ///< this rank's host
  int index = 0;  ///< this rank's place in hosts[host]; 0: it leads its host
  std::vector<int> leaders() const;
  /// Ranks on the hosts before `h`: where host h's bundle starts, in blocks.
  std::size_t blocks_before(int h) const;
  int num_ranks() const { return static_cast<int>(blocks_before(static_cast<int>(hosts.size()))); }
};

/// `topology` places every rank; `root`: the call's root, or -1 for an unrooted call.
HostGroups host_groups(const Topology& topology, int rank, int root = -1);

/// The views one two-level call runs its phases on. Lives for the call: the contexts it
/// hands out refer to its views.
class TwoLevel {
 public:
  TwoLevel(const Context& ctx, int root = -1);
  TwoLevel(const TwoLevel&) = delete;
  TwoLevel& operator=(const TwoLevel&) = delete;

  const HostGroups& groups() const { return groups_; }
  bool leader() const { return groups_.index == 0; }
  int num_hosts() const { return static_cast<int>(groups_.hosts.size()); }
  /// The members of this rank's host, leader first (view rank i = members()[i]).
  std::span<const int> members() const {
    return groups_.hosts[static_cast<std::size_t>(groups_.host)];
  }
  /// The call's context on this rank's host (rank 0 leads).
  Context host() const { return context_.on(host_); }
  /// The call's context among the leaders (view rank h leads host h); leaders only.
  Context leaders() const { return context_.on(*leaders_); }

 private:
  const Context& context_;
  HostGroups groups_;
  // Handed out as the transports of phases (which send through them) by const members.
  mutable SubsetTransport host_;
  mutable std::optional<SubsetTransport> leaders_;
};

/// Copies the blocks of `ranks` (block r of `src` sits at r x count) into `bundle`, one after
/// the other in the order of `ranks`.
void pack_blocks(void* bundle, const void* src, std::span<const int> ranks, std::size_t count,
                 DataType dtype);
/// The reverse: block i of `bundle` goes to block ranks[i] of `dst`.
void unpack_blocks(void* dst, const void* bundle, std::span<const int> ranks, std::size_t count,
                   DataType dtype);

/// Modelled seconds of `algorithm` running `collective` on `bytes` (selection_bytes' meaning)
/// among `ranks` ranks of one host over its local links, or, `across_hosts`, among `ranks`
/// ranks on as many hosts. The rest of the call (dtype, op, parameters) is `in`'s.
double phase_cost(const Algorithm& algorithm, const CostInput& in, Collective collective,
                  double bytes, int ranks, bool across_hosts);
/// The leaders' exchange of host bundles: one message to (or from) every other host, carrying
/// `bytes_per_rank` for each rank on the other hosts, over the links between hosts.
double bundles_cost(const CostInput& in, double bytes_per_rank);
/// Whether a two-level form is worth modelling: several hosts, some with several ranks (with
/// one host or one rank per host it degenerates into a flat algorithm, left to those).
bool two_levels(const Machine& machine);

}  // namespace chorus::algorithms
