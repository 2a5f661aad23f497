// When a waiting rank sends PROBE frames, and how a probe is judged.
//
// Why probes: ranks that called different collectives can wait on each other
// with no message ever flowing (rank 0 in allreduce #3 waits for rank 2, which
// is in broadcast #3 waiting for rank 0), so the fingerprint check on messages
// never runs. A stalled rank therefore tells every peer which collective it is
// in. Collective sequence numbers count calls on the communicator, so a peer in
// call S with another fingerprint is certainly in a different call: a
// Mismatch. A probe with a later sequence number says nothing (that peer is
// merely ahead); one with an earlier number is compared with this rank's own call
// of that number (call_history.hpp), which this rank left without meeting the
// prober: so a slow rank is never reported, a rank in another call always is.
//
// Stalled = no request posted or completed for kStallProbeDelay while waiting.
// Moving bytes of a long message does not count as progress: a probe during a
// slow but matching transfer costs one 40-byte frame per peer and is harmless.
#pragma once

#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "transport/peer_channel.hpp"

#include <optional>
#include <string>
#include <vector>

namespace chorus::transport {

/// Long enough that a healthy collective rarely stalls this long (one probe
/// frame per peer when it does), short enough to report a mismatch in well
/// under a second.
inline constexpr auto kStallProbeDelay = std::chrono::milliseconds(150);
/// While still stalled, probes are repeated this often (a peer may have
/// entered its call after our last probe was read and dropped).
inline constexpr auto kStallProbeRepeat = std::chrono::seconds(2);

/// Decides when probes are due. Not thread-safe (the progress thread owns it).
class StallClock {
 public:
  /// A request was posted or completed at `now`: not stalled.
  void activity(Clock::time_point now) {
    last_activity_ = now;
    last_probe_.reset();
  }
  /// True when a probe is due at `now` (then it counts as sent): stalled for
  /// kStallProbeDelay and not probed yet, or kStallProbeRepeat since the last probe.
  bool probe_due(Clock::time_point now) {
    bool due = last_probe_ ? now - *last_probe_ >= kStallProbeRepeat
                           : now - last_activity_ >= kStallProbeDelay;
    if (due) last_probe_ = now;
    return due;
  }

 private:
  Clock::time_point last_activity_ = Clock::now();
  std::optional<Clock::time_point> last_probe_;
};

/// The Mismatch sentence when rank `self`, waiting in collective `mine`, holds
/// probe `theirs` from rank `peer` with the same sequence number and a
/// fingerprint that does not match; nullopt otherwise (other seq, match, or
/// either side point-to-point).
std::optional<std::string> probe_conflict(int self, const Fingerprint& mine, int peer,
                                          const Fingerprint& theirs);

/// Where each peer was last seen, for the timeout sentence: the newest collective a
/// peer sent a probe for, or sent a message of that completed a receive here. Receives
/// complete in order per peer, so remembering the newest receive posted per peer (and
/// whether it is still pending) is enough; nothing is allocated per operation.
/// Not thread-safe (the progress thread owns it).
class PeerSightings {
 public:
  void resize(int size) {
    seen_.assign(size, std::nullopt);
    latest_recv_.assign(size, Recv{});
  }
  /// `peer` was seen in collective `call` (point-to-point calls are ignored).
  void saw(int peer, const Fingerprint& call);
  /// A receive from `peer` was posted (after it entered `pending`).
  void posted_recv(int peer, RequestId id, const Fingerprint& call, const PendingMap& pending);
  /// The newest collective `peer` was seen in, if any.
  std::optional<Fingerprint> last(int peer, const PendingMap& pending) const;

 private:
  struct Recv {
    RequestId id = 0;  ///< 0: none posted
    Fingerprint call;
  };
  std::vector<std::optional<Fingerprint>> seen_;
  std::vector<Recv> latest_recv_;
};

}  // namespace chorus::transport
