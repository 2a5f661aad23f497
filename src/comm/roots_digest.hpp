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
  /// Inline: every rooted call runs the fold, a polynomial hash of its (seq, root) with an
  /// odd multiplier (so a change of one call's pair always changes the sum); the barrier
  /// mixes the sum once (close).
  void stamp(Fingerprint& fp) {
    if (has_root(fp.collective)) {
      sum_ = (sum_ + ((fp.seq << 32) ^ static_cast<std::uint32_t>(fp.root))) * kMultiplier;
      if (calls_.count < kCallsKept) calls_.first[calls_.count] = fp;
      ++calls_.count;
    } else if (fp.collective == Collective::Barrier && calls_.count > 0) {
      close(fp);
    }
  }
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
  static constexpr std::uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;  ///< odd
  /// Puts the digest of the calls since the last barrier into barrier `fp`, starts anew.
  void close(Fingerprint& fp);
  std::uint64_t sum_ = 0;     ///< the fold of the rooted calls since the last barrier
  Calls calls_;               ///< since the last barrier
  mutable std::mutex mutex_;  ///< guards barriers_ (read by the thread a barrier fails on)
  std::deque<std::pair<std::uint64_t, Calls>> barriers_;
};

}  // namespace chorus::detail
