// Root disagreement caught at the next barrier.
//
// Ranks that disagree on a rooted call's root may each complete it: every group of ranks that
// agrees on a root finds a whole call, and a message-passing path may never compare the two
// groups' fingerprints. So every rooted call folds (seq, root) into a digest that the next
// barrier carries in its fingerprint's root field (unused by barriers): ranks whose roots
// differed since the previous barrier make different barriers, which every path compares
// (messages, probes, the host arena's records), and fail with a Mismatch. The digest is never
// -1, so a barrier after no rooted call keeps the plain fingerprint.
#pragma once

#include "core/collective.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace chorus::detail {

class RootsDigest {
 public:
  /// Folds a rooted call into the digest, or puts the digest into a barrier's fingerprint and
  /// starts a new one. Called in issue order by the issuing thread (under the issue lock).
  void stamp(Fingerprint& fp);
  /// The rooted calls this rank made before barrier `barrier_seq` (since the one before),
  /// for the barrier's mismatch sentence; "" when unknown. Any thread.
  std::string calls_before(std::uint64_t barrier_seq) const;

 private:
  static constexpr std::size_t kCallsKept = 8;      ///< named per barrier; more are counted
  static constexpr std::size_t kBarriersKept = 16;  ///< barriers whose calls are remembered
  /// The rooted calls before one barrier: the first kCallsKept, and how many there were.
  /// Described only when the barrier fails, so a rooted call costs a copy, not a sentence.
  struct Calls {
    std::array<Fingerprint, kCallsKept> first;
    std::size_t count = 0;
  };
  std::int32_t digest_ = -1;
  Calls calls_;               ///< since the last barrier
  mutable std::mutex mutex_;  ///< guards barriers_ (read by the thread a barrier fails on)
  std::deque<std::pair<std::uint64_t, Calls>> barriers_;
};

}  // namespace chorus::detail
