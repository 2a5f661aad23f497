// What the two-level (hierarchical) algorithms share: the groups of a call (every host's
// ranks, each with its leader first), the views their phases run on (a host's ranks, the
// leaders), the packing of a host's blocks into one bundle, and the cost of one phase.
//
// A two-level call runs flat algorithms on SubsetTransport views: inside each host over
// the local links, then among one leader per host across hosts, then inside each host
// again, so only leaders send across hosts and each host's traffic crosses the network
// once, in a few large messages. A rooted call's root leads its own host (no extra hop);
// elsewhere a host's lowest rank leads.
//
// On hosts of equal size the all-reduce, all-gather and reduce-scatter also run in stripes
// (Stripes): place i of every host (its i-th rank) owns stripe i, and the ranks of one place,
// one per host (a column), exchange their stripe across hosts, so every rank of a host uses
// the network at once and no rank carries a host phase alone.
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

/// Whether a call can run in stripes on `topology`: several hosts, all holding the same
/// number of ranks, more than one. Elsewhere the striped forms run their leaders' form.
bool stripes_fit(const Topology& topology);

/// The ranks a striped call groups (stripes_fit): a rank's place is its index among its
/// host's ranks, ascending; its column is the rank of its place on every host.
struct StripeGroups {
  std::vector<int> host;    ///< this rank's host's ranks, ascending (view rank = place)
  std::vector<int> column;  ///< the ranks of this rank's place, host by host (view rank = host)
  /// Every rank, column by column (place 0 of every host, host by host, then place 1, ...):
  /// a striped buffer holds the ranks' blocks in this order, stripe i being column i's blocks.
  std::vector<int> order;
};
StripeGroups stripe_groups(const Topology& topology, int rank);

/// The views of one striped call (stripes_fit must hold). Lives for the call: the contexts
/// it hands out refer to its views.
class Stripes {
 public:
  explicit Stripes(const Context& ctx);
  Stripes(const Stripes&) = delete;
  Stripes& operator=(const Stripes&) = delete;

  int place() const { return host_.rank(); }
  int host_index() const { return column_.rank(); }
  int num_hosts() const { return column_.size(); }
  int ranks_per_host() const { return host_.size(); }
  /// pack_blocks / unpack_blocks order of a striped buffer (StripeGroups::order).
  std::span<const int> order() const { return order_; }
  /// The call's context on this rank's host (view rank = place).
  Context host() const { return context_.on(host_); }
  /// The call's context on this rank's column (view rank = host index).
  Context column() const { return context_.on(column_); }

 private:
  Stripes(const Context& ctx, StripeGroups groups);
  const Context& context_;
  std::vector<int> order_;
  // Handed out as the transports of phases (which send through them) by const members.
  mutable SubsetTransport host_;
  mutable SubsetTransport column_;
};

/// A striped row's run (RunFunction): `stripes` runs the call where stripes_fit and it is not
/// trivial (finish_trivial_call); elsewhere the call goes to `leaders_form`, which is returned.
const Algorithm* run_striped(void (*stripes)(const Call&, const Context&),
                             const Algorithm& leaders_form, const Call& args, const Context& ctx);

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
/// Modelled seconds of `algorithm` running `collective` on `bytes` among one column of a
/// striped call (one rank per host) while the host's other columns do the same: the P ranks
/// of a host share its tcp links (CostParameters::tcp_links, L), so every byte a column sends
/// across costs max(P / L, 1) tcp betas.
double column_cost(const Algorithm& algorithm, const CostInput& in, Collective collective,
                   double bytes);
/// Modelled seconds of a striped all-gather or reduce-scatter (in.collective), infinite where
/// stripes do not fit: `on_hosts` on each host's P ranks with H m per rank, `in_columns` in each
/// column with m per rank (column_cost), and the n m copied into or out of stripe order.
double stripes_cost(const CostInput& in, const Algorithm& on_hosts, const Algorithm& in_columns);
/// Whether a two-level form is worth modelling: several hosts, some with several ranks (with
/// one host or one rank per host it degenerates into a flat algorithm, left to those).
bool two_levels(const Machine& machine);

}  // namespace chorus::algorithms
