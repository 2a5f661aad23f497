// The host arena: one shared-memory segment per communicator whose ranks all
// live on one host, in which the shm_direct collectives work directly.
//
// Layout: [FlagLine x n][DoorbellWord x (n + 1)][slot 0] ... [slot n-1]. Each slot (one
// per rank) is two halves of half the slot bytes each (CHORUS_SHM_ARENA_BYTES, or
// shm_budget::arena_slot_bytes), then kLanes lanes of lane_bytes() (shm_budget::
// arena_lane_bytes). A round that writes at most lane_bytes() into any rank's buffer
// (the caller says so in begin_round) is a small round and uses lane g % kLanes;
// any other round g uses half g % 2. So a rank may fill round g + 1 while slower
// ranks still read round g, and small rounds (rooted collectives of small
// messages, where one side never waits for the other) may run up to
// kLanes - 1 rounds ahead of the slowest rank, which keeps ranks that share
// cores from trading the CPU once per call.
//
// Rounds. Every arena collective is a sequence of rounds, numbered by a counter
// that every rank advances identically (ranks call the same collectives in the
// same order and selection is a pure function). A rank's flag only grows:
//   2g     "my writes of round g are visible, and I finished reading round g - 1";
//   2g + 1 "my second-phase writes of round g are visible" (optional).
// Before beginning round g a rank waits until every rank finished reading the
// last round that used the buffer and round record g takes: every rank has
// posted 2g - 2 for a half (round g - 2 used it), 2(g - kLanes + 1) for a lane
// (round g - kLanes used it, and record g % kLanes); that is begin_round.
//
// Mismatch: when a rank begins round g it publishes, next to its flag, a round
// record: g and the fingerprint of the call that round belongs to (record
// g % kLanes, reused under the same rule as the lanes). Every wait for a peer's
// flag of round q (2q or 2q + 1 in this rank's round q) then compares the peer's
// record of round q with its own and throws Mismatch when they differ; so does
// begin_round(g) for every peer that already posted round g - 1. The record
// travels with the data of its round, so a reader checks the call of every round
// it reads even when the writer has already left it.
// Tiny rounds. A small round whose buffers hold at most kInlineBytes keeps them in
// the round's record line itself, beside a `posted` word that the writer sets to 2g
// (release) before its flag: a reader waits on that one line and finds the record
// and the data in it, so a tiny call costs one cache-line transfer per peer instead
// of three (flag, record, buffer). The flag still follows (begin_round's reuse rule
// and the second phase read flags); a peer whose round is not tiny (another call) is
// caught by the flag, and its record then fails the check.
// Waiting follows the transport's WaitPolicy (spin, then yield; only yield when ranks
// outnumber the CPUs), then sleeps on a futex doorbell (5 ms at most): the awaited rank's
// own when it waits for one rank (only that rank's posts wake it), else the arena's
// (every post rings both), calling
// the transport's Liveness (transport/liveness.hpp: aborts, dead peers, probes) every millisecond
// (every 20 us per rank past 50 ranks), so nothing hangs.
#pragma once

#include "bootstrap/store.hpp"
#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "transport/arena/windows.hpp"
#include "transport/doorbell.hpp"
#include "transport/liveness.hpp"
#include "transport/wait_policy.hpp"

#include <chorus/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport::shm {
class Segment;  // transport/arena/segment.hpp
}  // namespace chorus::transport::shm

namespace chorus::transport {

/// Which call a rank's round belongs to; `round` is 0 while being rewritten.
/// Aligned so that no record straddles two cache lines (one transfer per check).
struct alignas(32) RoundRecord {
  std::atomic<std::uint64_t> round{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> shape{0};  ///< root, collective, dtype, op packed
};

/// Small rounds in flight per rank (each in a lane of HostArena::lane_bytes()).
inline constexpr int kLanes = 64;
/// The bytes a tiny round gives each rank, in its record line.
inline constexpr std::size_t kInlineBytes = 24;

/// A round record with a tiny round's data: one cache line.
struct alignas(64) RecordLine {
  RoundRecord record;
  std::atomic<std::uint64_t> posted{0};  ///< 2g once tiny round g's data is written; only grows
  std::byte payload[kInlineBytes];
};
static_assert(sizeof(RecordLine) == 64);

/// One rank's flag (a line of its own) and its records of its latest rounds (round g
/// in record g % kLanes).
struct alignas(64) FlagLine {
  std::atomic<std::uint64_t> flag{0};
  RecordLine rounds[kLanes];
};

class HostArena {
 public:
  /// Per-rank slot bytes on a host of `host_ranks` ranks: CHORUS_SHM_ARENA_BYTES (4096 ..
  /// 1 GiB) when set, else shm_budget::arena_slot_bytes (4 MiB up to 8 ranks). The arena
  /// uses at least 128 bytes per rank, so a round holds 8 bytes per rank.
  static std::size_t slot_bytes_for(int host_ranks);

  /// Collective over the `size` ranks of a communicator on one host: rank 0
  /// creates the segment (named after its random `token`), the others map it,
  /// rank 0 withdraws it once all have. Store keys "transport/arena/...".
  /// `sized_for`: size the slots and lanes for at least this many ranks on the host (a
  /// sub-communicator passes its parent's count, as for the rings).
  static std::unique_ptr<HostArena> connect(Store& store, int rank, int size,
                                            const std::string& token, Deadline deadline,
                                            int sized_for = 0);

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Bytes each rank may use per round (half a slot, a multiple of 64).
  std::size_t round_bytes() const { return half_bytes_; }
  /// Bytes of each lane: a round of at most this many bytes per rank is a small round.
  std::size_t lane_bytes() const { return lane_bytes_; }
  /// Passed to begin_round by a caller that does not say how much a round holds.
  static constexpr std::size_t kWholeRound = ~std::size_t{0};
  /// Rank `r`'s buffer in round `round`.
  std::byte* buffer(int r, std::uint64_t round) const;

  /// Starts a call: a broken transport fails it now, and at most once per millisecond of
  /// `now` a full watcher pass (an ABORT frame that already arrived, a dead peer) runs first,
  /// so a call that never waits notices those within a millisecond, or within the coarse
  /// clock's tick (1-4 ms) when `now` is coarse_now(); every wait runs its own
  /// passes. Must precede the call's first round. `now`: when the call started (the
  /// caller's clock reading; a time point that goes backwards only delays the next pass).
  void begin_call(const Fingerprint& call, Clock::time_point now) {
    if (watcher_) {
      if (now >= next_call_check_) {
        call_check(call, now);
      } else {
        watcher_->arena_throw_if_broken();
      }
    }
    call_ = call;
    call_shape_ = shape_of(call);
  }
  /// One watcher pass now: throws the failure the transport already knows of (a broken
  /// transport, an ABORT frame that arrived, a dead peer), if any.
  void check_now() {
    if (watcher_) watcher_->arena_check(call_, /*send_probe=*/false);
  }
  /// Starts the next round and returns its number: waits until this rank may
  /// reuse the buffer and round record of that round, then publishes the record.
  /// `bytes`: the most any rank writes into its buffer in this round, the same on
  /// every rank (a function of the call); at most lane_bytes() makes it a small round, at
  /// most kInlineBytes a tiny one.
  std::uint64_t begin_round(Deadline deadline, std::size_t bytes = kWholeRound);
  /// Publishes `value` as this rank's flag and wakes sleepers.
  void post(std::uint64_t value) {
    const std::size_t lane = round_ % kLanes;
    if (value == 2 * round_ && tiny_rounds_[lane]) {
      line(rank_).rounds[lane].posted.store(value, std::memory_order_release);
    }
    line(rank_).flag.store(value, std::memory_order_release);  // ring_both() fences
    Doorbell::ring_both(doorbell_, posted_bell(rank_));
  }
  /// Waits until rank `r`'s flag is at least `value` (of this rank's current or
  /// previous round), then checks r's record of that round. Throws Mismatch when
  /// it names another call, Timeout at `deadline`, or what the watcher throws.
  void wait_for(int r, std::uint64_t value, Deadline deadline) {
    if (!reached(r, value)) wait_slow(r, value, deadline);
    if (checked_[static_cast<std::size_t>(r)] != value / 2) check_round_of(r, value / 2);
  }
  /// wait_for every other rank.
  void wait_all(std::uint64_t value, Deadline deadline);
  /// Whether rank `r`'s flag is at least `value` now, with its record of that round checked
  /// (wait_for without waiting).
  bool ready(int r, std::uint64_t value);
  /// Calls `take(r)` once for every other rank r as soon as r's flag reaches `value` (as
  /// wait_for), in whatever order they get there, starting with rank + 1: a rank that is not
  /// running holds up only its own part. Waits (wait_for) only when none is ready.
  template <typename Take>
  void for_each_ready(std::uint64_t value, Deadline deadline, Take&& take);

  /// Connects the arena's waits to the transport's liveness (aborts, dead peers, probes) and
  /// takes its wait policy; `liveness` must outlive the arena. Without it (tests) waits see
  /// only the deadline.
  void set_liveness(Liveness* liveness) {
    watcher_ = liveness;
    if (liveness) wait_policy_ = liveness->wait_policy();
  }
  /// How wait_for polls, yields and sleeps (set_liveness takes the transport's).
  void set_wait_policy(const WaitPolicy& policy) { wait_policy_ = policy; }
  /// Whether this host has more ranks than CPUs (the wait policy's verdict): a round handed
  /// to a rank that is not running then costs a scheduler slice, so fewer rounds are better.
  bool cores_shared() const { return wait_policy_.cores_shared; }
  /// The communicator's shared windows (windows.hpp).
  WindowTable& windows() { return windows_; }

 private:
  HostArena(std::shared_ptr<Segment> segment, int rank, int size, std::size_t slot_bytes,
            std::size_t lane_bytes);
  FlagLine& line(int r) const;
  /// A call's root, collective, dtype and op in one word (what a round record holds).
  static std::uint64_t shape_of(const Fingerprint& call) {
    return std::uint64_t{static_cast<std::uint32_t>(call.root)} << 32 |
           std::uint64_t{static_cast<std::uint8_t>(call.collective)} << 16 |
           std::uint64_t{call.dtype} << 8 | call.op;
  }
  /// begin_call's full watcher pass (at most once per check_period_ of its `now`).
  void call_check(const Fingerprint& call, Clock::time_point now);
  /// Rank r's own doorbell: its posts ring it, waits for r alone sleep on it.
  Doorbell posted_bell(int r) const { return Doorbell(bells_ + 1 + r); }
  bool reached(int r, std::uint64_t value);
  void publish_round();
  /// Checks rank r's record of `round` against this rank's (inline; failures out of line).
  void check_round_of(int r, std::uint64_t round);
  /// What check_round_of read of a record: its tag before and after the fields, and them.
  struct RecordRead {
    std::uint64_t before, seq, count, shape, after;
  };
  /// check_round_of's failure: a record rewritten while read (InternalError), or another
  /// call's (Mismatch).
  [[noreturn, gnu::cold]] void fail_round_check(int r, std::uint64_t round, const RecordRead& read);
  [[noreturn]] void fail(const Error& error);
  void wait_slow(int r, std::uint64_t value, Deadline deadline);
  /// Waits until some rank of `ranks` has a flag of at least `value` (records unchecked).
  void wait_any(std::span<const int> ranks, std::uint64_t value, Deadline deadline);
  /// Polls `reached()` (a flag of `awaited` at `value`), then yields, then sleeps (the wait
  /// policy), with watcher passes and the deadline. Fails when one of the `awaited` ranks is
  /// gone (Liveness::arena_lost) and `reached()` still is not.
  template <typename Reached>
  void wait_until(Reached&& reached, std::uint64_t value, std::span<const int> awaited,
                  Deadline deadline);
  /// The call of the newest round record rank `r` published: where it was last seen here.
  std::optional<Fingerprint> newest_call_of(int r) const;
  /// Fails with the timeout sentence (timeout_sentence) of a wait of `waited` for a flag of
  /// `awaited` at `value`; ranks are seen in their round records and the watcher's sightings.
  [[noreturn]] void fail_timeout(std::span<const int> awaited, std::uint64_t value,
                                 Clock::duration waited);

  std::shared_ptr<Segment> segment_;
  int rank_;
  int size_;
  std::size_t slot_bytes_;        ///< both halves
  Clock::duration check_period_;  ///< between watcher passes while waiting
  std::size_t stride_;            ///< from one rank's slot to the next: halves and lanes
  std::size_t half_bytes_;
  std::size_t lane_bytes_;
  FlagLine* lines_ = nullptr;  ///< the segment's head: every rank's FlagLine
  std::byte* slots_ = nullptr;
  DoorbellWord* bells_ = nullptr;  ///< the arena's doorbell, then one per rank
  Doorbell doorbell_;              ///< bells_[0]: waits for any of several ranks sleep here
  Liveness* watcher_ = nullptr;    ///< the transport's liveness, or none
  WaitPolicy wait_policy_;
  WindowTable windows_;
  Fingerprint call_;
  Clock::time_point next_call_check_{};      ///< begin_call's next full watcher pass
  std::uint64_t round_ = 0;                  ///< last round begun
  Fingerprint round_calls_[kLanes];          ///< the call of round g is round_calls_[g % kLanes]
  std::uint64_t call_shape_ = 0;             ///< call_'s root, collective, dtype and op packed
  std::uint64_t round_shapes_[kLanes] = {};  ///< call_shape_ of round g at g % kLanes
  bool small_rounds_[kLanes] = {};           ///< whether round g is in lane g % kLanes
  bool tiny_rounds_[kLanes] = {};            ///< whether round g is in record line g % kLanes
  std::vector<std::uint64_t> seen_;          ///< per rank: the highest flag this rank loaded
  std::vector<std::uint64_t> checked_;       ///< per rank: the last round whose record matched
};

// Inline: every round of every arena call runs these (their waits and failures out of line).
inline FlagLine& HostArena::line(int r) const { return lines_[r]; }

/// Flags only grow, so a value seen once stays a lower bound: a peer's line is
/// read only when what this rank already saw is not enough. The first phase of a
/// recent tiny round is read from its record line: r stores `posted` (release) after
/// the round's data and after finishing the reads that flag 2g vouches for, and a
/// record line's `posted` only grows (its later rounds post larger values).
inline bool HostArena::reached(int r, std::uint64_t value) {
  std::uint64_t& seen = seen_[static_cast<std::size_t>(r)];
  if (seen >= value) return true;
  const std::uint64_t q = value / 2;
  if (value % 2 == 0 && q <= round_ && q + kLanes > round_ && tiny_rounds_[q % kLanes] &&
      line(r).rounds[q % kLanes].posted.load(std::memory_order_acquire) >= value) {
    seen = value;
    return true;
  }
  seen = line(r).flag.load(std::memory_order_acquire);
  return seen >= value;
}

inline std::byte* HostArena::buffer(int r, std::uint64_t round) const {
  std::byte* slot = slots_ + stride_ * static_cast<std::size_t>(r);
  const std::size_t lane = round % kLanes;
  if (tiny_rounds_[lane]) return line(r).rounds[lane].payload;
  if (small_rounds_[lane]) return slot + slot_bytes_ + lane_bytes_ * lane;
  return slot + half_bytes_ * (round % 2);
}

inline std::uint64_t HostArena::begin_round(Deadline deadline, std::size_t bytes) {
  const std::uint64_t g = round_ + 1;
  const bool small = bytes <= lane_bytes_;
  // The round whose reading must be over everywhere: the last user of g's buffer.
  const std::uint64_t lanes = static_cast<std::uint64_t>(kLanes);
  const std::uint64_t done = small ? (g >= lanes ? g - lanes + 1 : 0) : g - 1;
  for (int r = 0; r < size_ && g >= 2; ++r) {
    if (r == rank_) continue;
    if (done >= 1 && !reached(r, 2 * done)) wait_slow(r, 2 * done, deadline);
    // r's record of round g - 1 (this rank's last) stays until r begins round
    // g - 1 + kLanes, which needs this rank's flag of round g: check it when r is there.
    // (Every round, even when this rank runs ahead of r and so reads r's lines for this
    // alone: two ranks that both only write, such as two ranks that each think they are
    // a scatter's root, meet no other check before a later wait, by when the record of
    // the round they disagree on may be gone.)
    if (checked_[static_cast<std::size_t>(r)] != g - 1 && reached(r, 2 * (g - 1))) {
      check_round_of(r, g - 1);
    }
  }
  round_ = g;
  round_calls_[g % kLanes] = call_;
  round_shapes_[g % kLanes] = call_shape_;
  small_rounds_[g % kLanes] = small;
  tiny_rounds_[g % kLanes] = bytes <= kInlineBytes;
  publish_round();
  return g;
}

/// Seqlock write of this rank's record of round_: the tag goes to 0 first, so a
/// reader that loads any new field (acquire, synchronizing with its release
/// store) then sees the tag 0 or later, never the old round number. The record
/// is reused only after every rank left round_ - kLanes (begin_round), so in
/// practice nobody reads it now; the tag makes a violation an error, not a wrong check.
inline void HostArena::publish_round() {
  RoundRecord& record = line(rank_).rounds[round_ % kLanes].record;
  record.round.store(0, std::memory_order_relaxed);
  record.seq.store(call_.seq, std::memory_order_release);
  record.count.store(call_.count, std::memory_order_release);
  record.shape.store(call_shape_, std::memory_order_release);
  record.round.store(round_, std::memory_order_release);
}

/// Rank r posted a flag of round `round` (this rank's current or previous one), so
/// its record of that round is complete: r stored it (release) before that flag
/// (seq_cst), which this rank loaded with acquire. Seqlock read (publish_round):
/// the fields are one record when the tag reads `round` before and after them.
/// The packed fields are compared: arena calls are collectives, whose fingerprints match
/// when every field does (fingerprints_match).
inline void HostArena::check_round_of(int r, std::uint64_t round) {
  RoundRecord& record = line(r).rounds[round % kLanes].record;
  RecordRead read;
  read.before = record.round.load(std::memory_order_acquire);
  read.seq = record.seq.load(std::memory_order_acquire);
  read.count = record.count.load(std::memory_order_acquire);
  read.shape = record.shape.load(std::memory_order_acquire);
  read.after = record.round.load(std::memory_order_relaxed);
  const Fingerprint& mine = round_calls_[round % kLanes];
  if (read.before != round || read.after != round || read.seq != mine.seq ||
      read.count != mine.count || read.shape != round_shapes_[round % kLanes]) {
    fail_round_check(r, round, read);
  }
  checked_[static_cast<std::size_t>(r)] = round;
}

inline void HostArena::wait_all(std::uint64_t value, Deadline deadline) {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) wait_for(r, value, deadline);
  }
}

template <typename Take>
void HostArena::for_each_ready(std::uint64_t value, Deadline deadline, Take&& take) {
  if (size_ == 2) {  // one other rank: nothing to take in another order
    const int other = 1 - rank_;
    wait_for(other, value, deadline);
    take(other);
    return;
  }
  thread_local std::vector<int> pending;
  pending.clear();
  for (int step = 1; step < size_; ++step) pending.push_back((rank_ + step) % size_);
  while (!pending.empty()) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const int r = pending[i];
      if (ready(r, value)) {
        take(r);
      } else {
        pending[kept++] = r;
      }
    }
    if (kept == pending.size()) wait_any({pending.data(), kept}, value, deadline);
    pending.resize(kept);
  }
}

}  // namespace chorus::transport
