// The host arena: one shared-memory segment per communicator whose ranks all
// live on one host, in which the shm_direct collectives work directly.
//
// Layout: [FlagLine x n][DoorbellWord][slot 0] ... [slot n-1]. Each slot (one
// per rank, CHORUS_SHM_ARENA_BYTES) is two halves; round g of any collective
// uses half g % 2 of every slot, so a rank may fill round g + 1 while slower
// ranks still read round g.
//
// Rounds. Every arena collective is a sequence of rounds, numbered by a counter
// that every rank advances identically (ranks call the same collectives in the
// same order and selection is a pure function). A rank's flag only grows:
//   2g     "my writes of round g are visible, and I finished reading round g - 1";
//   2g + 1 "my second-phase writes of round g are visible" (optional).
// Before beginning round g (writing its half, or only its round record below) a
// rank waits until every rank has posted 2g - 2 (finished reading round g - 2,
// the last user of that half); that is begin_round.
//
// Mismatch: when a rank begins round g it publishes, next to its flag, a round
// record: g and the fingerprint of the call that round belongs to (record
// g % 2, so it is reused under the same rule as the data half). Every wait for
// a peer's flag of round q (2q, 2q + 1, or 2q in begin_round(q + 1)) then
// compares the peer's record of round q with its own and throws Mismatch when
// they differ. The record travels with the data of its round, so a reader checks
// the call of every round it reads even when the writer has already left it.
// Waiting spins ~20 us, yields, then sleeps on the arena's futex doorbell (5 ms
// at most), calling the ArenaWatcher (the progress engine: aborts, dead peers,
// probes) every millisecond, so nothing hangs.
#pragma once

#include "bootstrap/store.hpp"
#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "transport/doorbell.hpp"
#include "transport/shm/segment.hpp"
#include "transport/wait_policy.hpp"

#include <chorus/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace chorus::transport::shm {

/// Which call a rank's round belongs to; `round` is 0 while being rewritten.
struct RoundRecord {
  std::atomic<std::uint64_t> round{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> shape{0};  ///< root, collective, dtype, op packed
};

/// One rank's flag and its records of its two latest rounds (round g in record g % 2).
struct alignas(64) FlagLine {
  std::atomic<std::uint64_t> flag{0};
  RoundRecord rounds[2];
};

/// What the arena asks of the transport while it waits.
class ArenaWatcher {
 public:
  virtual ~ArenaWatcher() = default;
  /// One liveness pass: throws (and breaks the transport) when it is aborted, a
  /// peer died or aborted, or a probe shows a peer in another call `call`.
  /// `send_probe`: tell every peer which call this rank waits in.
  virtual void arena_check(const Fingerprint& call, bool send_probe) = 0;
  /// Breaks the transport with `error` and throws it.
  [[noreturn]] virtual void arena_fail(const Error& error) = 0;
};

class HostArena {
 public:
  /// Per-rank slot bytes: CHORUS_SHM_ARENA_BYTES (4096 .. 1 GiB), default 4 MiB. The
  /// arena uses at least 128 bytes per rank, so a round holds 8 bytes per rank.
  static std::size_t slot_bytes_from_env();

  /// Collective over the `size` ranks of a communicator on one host: rank 0
  /// creates the segment (named after its random `token`), the others map it,
  /// rank 0 unlinks it once all have. Store keys "transport/arena/...".
  static std::unique_ptr<HostArena> connect(Store& store, int rank, int size,
                                            const std::string& token, Deadline deadline);

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Bytes each rank may use per round (half a slot, a multiple of 64).
  std::size_t round_bytes() const { return half_bytes_; }
  /// Rank `r`'s buffer in round `round`.
  std::byte* buffer(int r, std::uint64_t round) const;

  /// Starts a call: one watcher pass (a broken transport or an ABORT frame that
  /// already arrived fails it now). Must precede the call's first round.
  void begin_call(const Fingerprint& call);
  /// Starts the next round and returns its number: waits until this rank may
  /// reuse its half and round record of that round, then publishes the record.
  std::uint64_t begin_round(Deadline deadline);
  /// Publishes `value` as this rank's flag and wakes sleepers.
  void post(std::uint64_t value);
  /// Waits until rank `r`'s flag is at least `value` (of this rank's current or
  /// previous round), then checks r's record of that round. Throws Mismatch when
  /// it names another call, Timeout at `deadline`, or what the watcher throws.
  void wait_for(int r, std::uint64_t value, Deadline deadline);
  /// wait_for every other rank.
  void wait_all(std::uint64_t value, Deadline deadline);

  void set_watcher(ArenaWatcher* watcher) { watcher_ = watcher; }
  /// How wait_for polls, yields and sleeps (the transport's, chosen for this host).
  void set_wait_policy(const WaitPolicy& policy) { wait_policy_ = policy; }

 private:
  HostArena(std::shared_ptr<Segment> segment, int rank, int size, std::size_t slot_bytes);
  FlagLine& line(int r) const;
  void publish_round();
  void check_round_of(int r, std::uint64_t round);
  [[noreturn]] void fail(const Error& error);
  void wait_slow(int r, std::uint64_t value, Deadline deadline);

  std::shared_ptr<Segment> segment_;
  int rank_;
  int size_;
  std::size_t slot_bytes_;
  std::size_t half_bytes_;
  std::byte* slots_ = nullptr;
  Doorbell doorbell_;
  ArenaWatcher* watcher_ = nullptr;
  WaitPolicy wait_policy_;
  Fingerprint call_;
  std::uint64_t round_ = 0;     ///< last round begun
  Fingerprint round_calls_[2];  ///< the call of round g is round_calls_[g % 2]
};

}  // namespace chorus::transport::shm
