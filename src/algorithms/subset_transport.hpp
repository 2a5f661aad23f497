// A view of some ranks of a transport as a transport of their own, so that
// hierarchical algorithms can run the flat algorithms within a host or among
// host leaders. Rank i of the view is members[i] of the parent; every call is
// forwarded with peers translated; errors name the parent's ranks.
#pragma once

#include "transport/transport.hpp"

#include <vector>

namespace chorus::algorithms {

class SubsetTransport final : public transport::Transport {
 public:
  /// `members` are distinct parent ranks, one of them the parent's own rank.
  SubsetTransport(transport::Transport& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const Topology& topology() const override { return topology_; }
  transport::RequestId post_send(int peer, const void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override;
  transport::RequestId post_recv(int peer, void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override;
  void wait(std::span<const transport::RequestId> ids, Deadline deadline) override;
  bool test(std::span<const transport::RequestId> ids) override;
  bool wait_until(std::span<const transport::RequestId> ids, Deadline until) override;
  void interrupt() noexcept override;
  void abort(Status status, const std::string& reason) override;

 private:
  transport::Transport& parent_;
  std::vector<int> members_;
  int rank_ = -1;
  Topology topology_;
};

}  // namespace chorus::algorithms
