// The fingerprints of the collectives a rank made last, so that a peer's call
// can be compared with this rank's call of the same sequence number after this
// rank has left it.
//
// Why: ranks that disagree on a call can each finish it without meeting the other
// side (two groups with their own broadcast roots: each group's messages stay in
// the group). The disagreement shows later, in a message or a PROBE from a peer
// that is still in (or sent from) that older call while this rank is in a newer
// one; comparing it with this rank's own call of that number names both calls
// ("rank 1 made broadcast #3 (..., root 1) but rank 0 sent broadcast #3 (...,
// root 0)") instead of the unrelated newer call. Sequence numbers count calls on
// the communicator, so equal numbers with other fingerprints are a mismatch.
#pragma once

#include "core/collective.hpp"

#include <array>
#include <optional>
#include <string>

namespace chorus::transport {

class CallHistory {
 public:
  /// Calls remembered (older ones are forgotten: their comparison is skipped).
  static constexpr std::size_t kCalls = 64;

  /// This rank posted a message of `call` (point-to-point calls are ignored: their
  /// seq counts the messages of one pair). A few stores.
  void made(const Fingerprint& call) {
    if (!is_point_to_point(call.collective)) calls_[call.seq % kCalls] = call;
  }

  /// The Mismatch sentence when this rank (`self`) made call #theirs.seq, remembers
  /// it, and it does not match `theirs`, which rank `peer` `verb` ("sent", "is in").
  std::optional<std::string> conflict(int self, int peer, const Fingerprint& theirs,
                                      const char* verb) const {
    if (is_point_to_point(theirs.collective) || theirs.seq == 0) return std::nullopt;
    const Fingerprint& mine = calls_[theirs.seq % kCalls];
    if (mine.seq != theirs.seq || fingerprints_match(mine, theirs)) return std::nullopt;
    return "rank " + std::to_string(self) + " made " + describe(mine) + " but rank " +
           std::to_string(peer) + " " + verb + " " + describe(theirs);
  }

 private:
  std::array<Fingerprint, kCalls> calls_{};  ///< call #s at s % kCalls; seq 0: none
};

}  // namespace chorus::transport
