// The Transport every mesh returns: one PeerChannel per peer, driven from wait().
//
// Waiting policy (2 cores, up to 8 ranks per host, nothing spins forever):
// progress every channel in a loop; after kSpinTime without any byte moving,
// sched_yield() a few rounds; then sleep — poll() on the TCP descriptors and
// the wake eventfd, or the futex doorbell of this rank's shared-memory inbox
// when every link is shared memory (with both kinds, poll() with a 1 ms cap so
// shared-memory traffic is seen too). Each sleep ends by the deadline and at
// least every 50 ms, when every link checks that its peer is still alive.
//
// Failure: the first error (from wait() or abort()) breaks the transport; it
// is rethrown by every later call, and an ABORT frame carrying it is sent to
// every reachable peer (best effort, bounded by ~250 ms).
#pragma once

#include "transport/doorbell.hpp"
#include "transport/link.hpp"
#include "transport/peer_channel.hpp"
#include "transport/transport.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace chorus::transport {

class ProgressEngine final : public Transport {
 public:
  /// `links[p]` is the link to rank p (null for rank itself). `doorbell` is this
  /// rank's shared-memory doorbell, invalid when no link is shared memory; it
  /// must stay mapped as long as the links live (the shm links keep it mapped).
  ProgressEngine(int rank, int size, Topology topology, std::vector<std::unique_ptr<Link>> links,
                 Doorbell doorbell);
  ~ProgressEngine() override;
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const Topology& topology() const override { return topology_; }

  RequestId post_send(int peer, const void* data, std::size_t bytes,
                      const Fingerprint& fingerprint) override;
  RequestId post_recv(int peer, void* data, std::size_t bytes,
                      const Fingerprint& fingerprint) override;
  void wait(std::span<const RequestId> ids, Deadline deadline) override;
  void abort(Status status, const std::string& reason) override;

 private:
  void check_post(int peer, const void* data, std::size_t bytes) const;
  void wait_locked(std::span<const RequestId> ids, Deadline deadline);
  bool progress_all();
  bool all_done(std::span<const RequestId> ids) const;
  void check_peers_alive();
  void throw_if_peer_lost(std::span<const RequestId> ids) const;
  [[noreturn]] void throw_timeout(std::span<const RequestId> ids, Clock::duration waited) const;
  bool sleep(Deadline until);
  void wake() noexcept;
  /// Records `error` unless the transport is already broken (the first error wins).
  void record_failure(Status status, const std::string& reason);
  void throw_if_broken() const;
  /// Sends ABORT to every reachable peer once. Caller holds progress_mutex_.
  void send_abort_frames() noexcept;

  int rank_;
  int size_;
  Topology topology_;
  std::vector<std::unique_ptr<PeerChannel>> peers_;  ///< indexed by rank, null for self
  std::vector<int> poll_peers_;                      ///< ranks whose link has a descriptor
  Doorbell doorbell_;
  int wake_fd_ = -1;  ///< eventfd written by abort()
  PendingMap pending_;
  RequestId next_id_ = 1;
  bool abort_sent_ = false;

  std::mutex progress_mutex_;  ///< held by post/wait, and by abort() while it sends ABORT frames
  mutable std::mutex failure_mutex_;
  std::atomic<bool> broken_{false};
  std::optional<Error> failure_;  ///< guarded by failure_mutex_
};

}  // namespace chorus::transport
