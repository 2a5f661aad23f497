// The one sentence of a wait that passed its deadline, whichever transport waited
// (TCP links, shared-memory links, the host arena); docs/errors.md shows it.
#pragma once

#include "core/collective.hpp"
#include "core/deadline.hpp"

#include <optional>
#include <string>
#include <vector>

namespace chorus::transport {

/// What a wait that timed out knows.
struct TimedOutWait {
  int self = 0;                     ///< the rank that waited
  std::optional<Fingerprint> call;  ///< the collective it waited in; nullopt: point-to-point
  Clock::duration waited{};         ///< how long this wait lasted
  std::string ranks;                ///< whom it waited for: "3", "1, 2", "any"
  std::string what;                 ///< for what: "recv of 4 bytes for ...", "round 7 ..."
  /// Where each rank was last seen (PeerSightings, the arena's round records); only read
  /// when `call` is set.
  std::vector<std::optional<Fingerprint>> last_seen;
};

/// "allreduce #12 (count 4, float32, sum) timed out after 5.0s: rank 3 never reached it
/// (rank 3 last seen in broadcast #11 (...)); waiting for rank(s) 3 (recv of ...)" for a
/// collective; "timed out after 5.0s waiting for rank(s) 1 (recv of ...)" otherwise.
std::string timeout_sentence(const TimedOutWait& wait);

/// The part of the sentence after "<call> timed out after Ns: ": which ranks never reached
/// `call` — seen last in an earlier call, or not seen in any — e.g. "ranks 3, 5 never
/// reached it (rank 3 last seen in broadcast #11 (count 4, float32, root 0); rank 5 not
/// seen in any call yet)", or "every rank reached it". `last_seen[p]` is where rank p was
/// last seen; `self` is skipped.
std::string arrival_clause(int self, const Fingerprint& call,
                           const std::vector<std::optional<Fingerprint>>& last_seen);

/// Keeps in `seen` the newer sighting of each rank from `seen` and `more` (by sequence
/// number; point-to-point sightings are ignored). `seen` grows to `more`'s size.
void merge_sightings(std::vector<std::optional<Fingerprint>>& seen,
                     const std::vector<std::optional<Fingerprint>>& more);

}  // namespace chorus::transport
