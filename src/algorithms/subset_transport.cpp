// SubsetTransport: peer translation over a parent transport.
#include "algorithms/subset_transport.hpp"

#include <chorus/error.hpp>

#include <map>
#include <utility>

namespace chorus::algorithms {

SubsetTransport::SubsetTransport(transport::Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  const Topology& full = parent.topology();
  std::map<int, int> renumbered;  // parent host -> host of the view, by first appearance
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == parent.rank()) rank_ = static_cast<int>(i);
    int host = full.host_of_rank[static_cast<std::size_t>(members_[i])];
    auto [entry, added] = renumbered.try_emplace(host, static_cast<int>(renumbered.size()));
    topology_.host_of_rank.push_back(entry->second);
  }
  topology_.num_hosts = static_cast<int>(renumbered.size());
  if (rank_ < 0) throw Error(Status::InternalError, "a rank subset must contain the rank itself");
}

transport::RequestId SubsetTransport::post_send(int peer, const void* data, std::size_t bytes,
                                                const Fingerprint& fingerprint) {
  return parent_.post_send(members_[static_cast<std::size_t>(peer)], data, bytes, fingerprint);
}

transport::RequestId SubsetTransport::post_recv(int peer, void* data, std::size_t bytes,
                                                const Fingerprint& fingerprint) {
  return parent_.post_recv(members_[static_cast<std::size_t>(peer)], data, bytes, fingerprint);
}

void SubsetTransport::wait(std::span<const transport::RequestId> ids, Deadline deadline) {
  parent_.wait(ids, deadline);
}

bool SubsetTransport::test(std::span<const transport::RequestId> ids) { return parent_.test(ids); }

bool SubsetTransport::wait_until(std::span<const transport::RequestId> ids, Deadline until) {
  return parent_.wait_until(ids, until);
}

void SubsetTransport::interrupt() noexcept { parent_.interrupt(); }

void SubsetTransport::abort(Status status, const std::string& reason) {
  parent_.abort(status, reason);
}

}  // namespace chorus::algorithms
