// The flight recorder: each communicator's last N operations, for post-mortems.
//
// A ring of CHORUS_TRACE_BUFFER entries (default 256; 0 disables), allocated once
// when the communicator is created. Recording an operation overwrites one entry in
// place: no allocation. Every member takes the recorder's own lock (a YieldingLock: a
// blocking call that runs on its caller's thread records itself without the executor's
// mutex, and the lock is held only to write an entry), and snapshot() takes it too, so the
// dump path (flight_recorder_dump.hpp) reads a consistent copy. note_algorithm() only
// stores an atomic pointer that the next finished() picks up (one collective runs at a
// time on a communicator).
//
// Timestamps are steady-clock points (those of a blocking call run by its caller come from
// coarse_now(), core/deadline.hpp: the same clock at its tick's resolution); a snapshot
// carries a (steady, wall-clock) anchor taken at construction, so dumps of different ranks
// can be put on one wall-clock time line.
#pragma once

#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "core/yielding_lock.hpp"

#include <chorus/types.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::detail {

enum class OpState : std::uint8_t { Issued, Started, Completed, Failed };

/// "issued", "started", "completed", "failed".
std::string_view to_string(OpState state) noexcept;

/// What an operation is, as the code that issues it knows it.
struct OpDescription {
  Fingerprint fingerprint;  ///< collective, sequence number, count, dtype, op, root
  int peer = -1;            ///< send/recv: the other rank; -1 otherwise
};

/// One recorded operation.
struct TraceEntry {
  std::uint64_t id = 0;  ///< 1-based issue index on this communicator; 0: empty slot
  OpDescription op;
  OpState state = OpState::Issued;
  Status status = Status::Success;
  const std::string_view* algorithm = nullptr;  ///< a registered algorithm's name, if known
  Clock::time_point issued{}, started{}, ended{};
  std::array<char, 240> error{};  ///< the failure's sentence, truncated, NUL-terminated
};

/// Which communicator a record belongs to (written into every dump).
struct TraceIdentity {
  std::string job;     ///< shared by every rank of the job
  int world_rank = 0;  ///< rank in the world communicator the job started with
  std::string comm;    ///< "world", "world.split1.color0", ...
  int rank = 0;        ///< rank in this communicator
  int size = 1;
};

/// A consistent copy of a recorder, oldest entry first.
struct TraceSnapshot {
  TraceIdentity identity;
  std::size_t capacity = 0;
  std::uint64_t total = 0;  ///< operations ever issued (more than capacity: the oldest are gone)
  std::vector<TraceEntry> entries;
  Clock::time_point taken{};
  Clock::time_point anchor_steady{};
  std::chrono::system_clock::time_point anchor_wall{};
};

class FlightRecorder {
 public:
  using RecordId = std::uint64_t;  ///< 0: not recorded

  FlightRecorder(std::size_t capacity, TraceIdentity identity);

  bool enabled() const { return !ring_.empty(); }
  /// Records a new operation (overwriting the oldest when full), started at once when
  /// `started`; 0 when disabled. Inline, as finished(): every blocking call runs both.
  RecordId issued(const OpDescription& op, Clock::time_point now, bool started = false) {
    if (ring_.empty()) return 0;
    std::lock_guard lock(lock_);
    const RecordId id = ++total_;
    TraceEntry& e = slot(id);
    e.id = id;
    e.op = op;
    e.state = started ? OpState::Started : OpState::Issued;
    e.status = Status::Success;
    e.algorithm = nullptr;
    e.issued = now;
    e.started = started ? now : Clock::time_point{};
    e.ended = Clock::time_point{};
    e.error[0] = '\0';
    return id;
  }
  void started(RecordId id, Clock::time_point now);
  /// Completed (`status` Success) or failed with `error`; takes the noted algorithm.
  void finished(RecordId id, Status status, std::string_view error, Clock::time_point now) {
    std::lock_guard lock(lock_);
    TraceEntry* e = find(id);
    if (!e) return;
    if (!is_point_to_point(e->op.fingerprint.collective)) {
      // A load and a store, not an exchange: only the thread that ran this collective notes
      // its algorithm, before this, and nothing runs after it until this returns.
      e->algorithm = algorithm_.load(std::memory_order_relaxed);
      algorithm_.store(nullptr, std::memory_order_relaxed);
    }
    e->state = status == Status::Success ? OpState::Completed : OpState::Failed;
    e->status = status;
    e->ended = now;
    if (!error.empty()) copy_error(*e, error);
    // An empty error stays as issued() left it: "".
  }
  /// The algorithm the running collective chose; `name` must have static storage.
  void note_algorithm(const std::string_view* name) noexcept {
    algorithm_.store(name, std::memory_order_relaxed);
  }
  TraceSnapshot snapshot(Clock::time_point now) const;

 private:
  /// The entry of `id`, or nullptr when it was overwritten (or never recorded).
  TraceEntry* find(RecordId id) {
    if (id == 0 || ring_.empty()) return nullptr;
    TraceEntry& e = slot(id);
    return e.id == id ? &e : nullptr;
  }
  /// Writes `error` (truncated, NUL-terminated) into `e`.
  static void copy_error(TraceEntry& e, std::string_view error);
  /// Where `id` lives in the ring (a mask, not a division, for power-of-two capacities).
  TraceEntry& slot(RecordId id) {
    const std::uint64_t i = id - 1;
    return ring_[mask_ ? i & mask_ : i % ring_.size()];
  }

  TraceIdentity identity_;
  mutable YieldingLock lock_;  ///< guards ring_ and total_
  std::vector<TraceEntry> ring_;
  std::uint64_t mask_ = 0;  ///< capacity - 1 when it is a power of two (and above 1)
  std::uint64_t total_ = 0;
  std::atomic<const std::string_view*> algorithm_{nullptr};
  Clock::time_point anchor_steady_;
  std::chrono::system_clock::time_point anchor_wall_;
};

/// The dump format chorus-trace reads (one JSON object; see docs/errors.md).
std::string trace_json(const TraceSnapshot& snapshot, std::string_view reason);

}  // namespace chorus::detail
