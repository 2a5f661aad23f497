// The Transport every mesh returns: one PeerChannel per peer, driven from wait().
//
// Waiting policy, for wait() and wait_until() alike (2 cores, up to 8 ranks
// per host, nothing spins forever): progress every channel in a loop; after kSpinTime without any
// byte moving, sched_yield() a few rounds; then sleep — poll() on the TCP descriptors and the wake
// eventfd, or the futex doorbell of this rank's shared-memory inbox when every link is shared
// memory (with both kinds, poll() while a BellRelay thread sleeps on the doorbell and writes the
// eventfd when it rings, so shared-memory traffic ends the poll at once). Each sleep
// ends by the deadline and at least every 50 ms, when every link checks that its peer is still
// alive. interrupt() writes the eventfd and rings the doorbell, so a sleeper wakes at once.
//
// Stall probes (stall_probe.hpp): a wait that sees no request posted or
// completed for kStallProbeDelay sends a PROBE with the fingerprint of its
// oldest pending collective to every peer; probes received are compared with
// the pending collectives on entry to every wait/test and whenever one arrives.
//
// Links opened on first use (link_opener.hpp): the first post naming a peer that has no link
// yet opens it through the opener; a peer that cannot be reached is that peer's loss (its
// requests fail with the opener's error, as if its link had closed). Links that peers open
// towards this rank are adopted by the next progress pass (their opener wakes a sleeper). Only
// open links are watched, probed and told about an abort; an any-source receive opens them all.
//
// Failure: the first error (from wait() or abort()) breaks the transport; it
// is rethrown by every later call, and an ABORT frame carrying it is sent to
// every reachable peer (best effort, bounded by ~250 ms).
#pragma once

#include "transport/bell_relay.hpp"
#include "transport/doorbell.hpp"
#include "transport/link.hpp"
#include "transport/link_opener.hpp"
#include "transport/liveness.hpp"
#include "transport/peer_channel.hpp"
#include "transport/stall_probe.hpp"
#include "transport/transport.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace chorus::transport {

class ProgressEngine final : public Transport, public Liveness {
 public:
  /// `links[p]` is the link to rank p (null for rank itself). `doorbell` is this
  /// rank's shared-memory doorbell, invalid when no link is shared memory; it
  /// must stay mapped as long as the links live (the shm links keep it mapped). `opener`
  /// (may be null) opens the links of the peers it reaches, which have none in `links`.
  ProgressEngine(int rank, int size, Topology topology, std::vector<std::unique_ptr<Link>> links,
                 Doorbell doorbell, std::unique_ptr<LinkOpener> opener = nullptr);
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
  /// Defined in any_source.cpp.
  RequestId post_recv_any(void* data, std::size_t bytes, const Fingerprint& fingerprint,
                          int* source) override;
  void wait(std::span<const RequestId> ids, Deadline deadline) override;
  bool test(std::span<const RequestId> ids) override;
  bool wait_until(std::span<const RequestId> ids, Deadline until) override;
  void interrupt() noexcept override;
  void abort(Status status, const std::string& reason) override;

  // Liveness: aborts, dead peers and probes while a collective waits in the host arena.
  void arena_check(const Fingerprint& call, bool send_probe) override;
  void arena_throw_if_broken() override { throw_if_broken(); }
  std::optional<Error> arena_lost(int r) override;
  [[noreturn]] void arena_fail(const Error& error) override;
  std::vector<std::optional<Fingerprint>> arena_sightings() override;
  WaitPolicy wait_policy() const override { return wait_policy_; }

  /// poll() calls its sleeps made so far (tests and diagnostics: a rank with links of both
  /// kinds that waits for a shared-memory message should poll once, not once a millisecond).
  std::uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }

 private:
  void check_post(int peer, const void* data, std::size_t bytes) const;
  /// The channel to `peer`, its link opened first when it has none.
  PeerChannel& channel(int peer);
  /// Makes `link` the link to `peer`.
  void adopt(int peer, std::unique_ptr<Link> link);
  /// Adopts the links peers opened towards this rank, if any arrived.
  void adopt_arrivals();
  void check_ids(std::span<const RequestId> ids) const;
  /// Breaks the transport with `error` (unless already broken), tells the peers, throws.
  [[noreturn]] void fail(const Error& error);
  /// The wait loop; false when `until` passes (or, if `interruptible`, after interrupt()).
  bool wait_loop(std::span<const RequestId> ids, Deadline until, bool interruptible);
  /// One pass: liveness when due, progress (`*moved`: did any byte move), stall bookkeeping;
  /// true when all `ids` are done. Throws when the transport broke or a listed request can
  /// never complete.
  bool pass(std::span<const RequestId> ids, Clock::time_point now, bool* moved);
  bool progress_all();
  bool all_done(std::span<const RequestId> ids) const;
  void check_peers_alive();
  /// Restarts the stall clock when the number of pending requests changed.
  void note_activity(Clock::time_point now);
  /// Collective (not point-to-point) fingerprints of the listed pending requests.
  std::vector<Fingerprint> pending_calls(std::span<const RequestId> ids) const;
  /// Where each peer was last seen (sightings and held probes), for the timeout sentence.
  std::vector<std::optional<Fingerprint>> last_seen() const;
  /// Sends a PROBE to every peer when the stall clock says so.
  void maybe_probe(std::span<const RequestId> ids, Clock::time_point now);
  /// Throws Mismatch when a held probe conflicts with a listed pending collective; drops
  /// probes of calls this rank has reached. `only_news`: skip unless a probe just arrived.
  void check_probes(std::span<const RequestId> ids, bool only_news);
  /// Throws Mismatch when peer p's held probe conflicts with one of `calls` (this rank's
  /// pending collectives) or with this rank's own call of its number (history_).
  void judge_probe(int p, std::span<const Fingerprint> calls);
  void throw_if_peer_lost(std::span<const RequestId> ids) const;
  /// Any-source receives among `ids` fail when any peer is lost (any_source.cpp).
  void throw_if_any_source_lost(std::span<const RequestId> ids) const;
  /// "any-source recv of 8 bytes for recv #0 (...)" for a pending any-source id, else "".
  std::string describe_any_source(RequestId id) const;
  [[noreturn]] void throw_timeout(std::span<const RequestId> ids, Clock::duration waited) const;
  bool sleep(Deadline until, bool interruptible);
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
  std::unique_ptr<LinkOpener> opener_;  ///< links opened on first use (null: all given)
  int wake_fd_ = -1;                    ///< eventfd written by abort() and interrupt()
  /// Ends a poll() when the doorbell rings (null without a doorbell; its thread starts at the
  /// first poll that has shared-memory peers to hear too). Declared after wake_fd_.
  std::unique_ptr<BellRelay> relay_;
  std::atomic<std::uint64_t> polls_{0};
  PendingMap pending_;
  AnySourceRecvs any_;  ///< any-source receives (not in pending_), shared with the channels
  RequestId next_id_ = 1;
  std::size_t pending_seen_ = 0;  ///< pending_.size() when the stall clock last looked
  StallClock stall_;
  PeerSightings sightings_;
  CallHistory history_;  ///< the collectives this rank posted messages of
  Clock::time_point next_liveness_{};
  std::atomic<bool> interrupted_{false};  ///< set by interrupt(), taken by wait_until()
  bool abort_sent_ = false;

  std::mutex progress_mutex_;  ///< held by post/wait, and by abort() while it sends ABORT frames
  mutable std::mutex failure_mutex_;
  std::atomic<bool> broken_{false};
  std::optional<Error> failure_;  ///< guarded by failure_mutex_
  WaitPolicy wait_policy_;        ///< polling, yielding, sleeping (chosen for this host)
};

}  // namespace chorus::transport
