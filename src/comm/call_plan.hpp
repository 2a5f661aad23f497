// Plans of blocking collectives: what a communicator decided the first time it met a call's
// shape, kept so that a repeat of that shape decides nothing again.
//
// A shape is what argument checking and algorithm selection read of a call besides its
// buffers: the collective, count, dtype, reduce op and root (the communicator's rank, size,
// machine and CHORUS_ALGO never change). The first blocking call of a shape is checked in
// full (validate.hpp) and, once it passed, planned: which of its buffers this rank needs
// (buffer_bytes), the fingerprint its messages carry (its sequence number aside), and the
// algorithm with its chunk, chosen as run_collective chooses (Avg lowered to Sum) for what
// the communicator offered then (Context::provides). A repeat call whose needed buffers are
// not NULL skips the checks and the selection (run_collective.hpp's run_planned); one that
// finds the communicator offering something else (a shared window allocated since) selects
// again. A NULL buffer the plan needs sends the call through the full checks, which name it.
//
// Only the issuing thread touches a PlanTable, under the communicator's issuing lock.
#pragma once

#include "algorithms/selection.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace chorus::detail {

/// What a planned call runs with; copied out of the table before the call runs.
struct PlannedRun {
  /// The algorithm and chunk for the call with Avg lowered; a null algorithm: the call runs
  /// on wide copies (algorithms/widen.hpp) and goes through run_collective.
  algorithms::Selection choice;
  algorithms::Needs provided = algorithms::kNeedsNothing;  ///< what the choice was made for
  std::size_t caller_bytes = 0;  ///< algorithms::selection_bytes of the caller's call
};

struct CallPlan {
  // The shape.
  std::size_t count = 0;
  Collective collective = Collective::Barrier;
  DataType dtype = DataType::Uint8;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  bool used = false;
  // What was decided.
  bool needs_send = false;  ///< a NULL send buffer fails the call on this rank
  bool needs_recv = false;  ///< a NULL receive buffer does
  Fingerprint fingerprint;  ///< the call's, with seq 0
  PlannedRun run;

  /// The shape but the count in one word (its root, collective, dtype and op).
  static std::uint64_t key_of(Collective collective, DataType dtype, ReduceOp op, int root) {
    return std::uint64_t{static_cast<std::uint32_t>(root)} << 32 |
           std::uint64_t{static_cast<std::uint8_t>(collective)} << 16 |
           std::uint64_t{static_cast<std::uint8_t>(dtype)} << 8 | static_cast<std::uint8_t>(op);
  }
  static std::uint64_t key_of(const algorithms::Call& call) {
    return key_of(call.collective, call.dtype, call.op, call.root);
  }
  /// What PlanTable::find compares with key_of(call): key_of(this plan's shape) when used,
  /// else a word no shape packs to (collectives are below 256).
  std::uint64_t key() const {
    return used ? key_of(collective, dtype, op, root) : ~std::uint64_t{0};
  }
  /// Whether `call` (of this shape) passes the checks the plan stands for.
  bool buffers_pass(const algorithms::Call& call) const {
    return (call.send != nullptr || !needs_send) && (call.recv != nullptr || !needs_recv);
  }
};

/// The plans of one communicator: direct-mapped on (count, collective), 64 entries.
class PlanTable {
 public:
  /// The plan of `call`'s shape, or nullptr.
  /// Two compares: the count and the rest of the shape packed in one word (CallPlan::key).
  const CallPlan* find(const algorithms::Call& call) const {
    const std::size_t i = index(call.count, call.collective);
    const bool hit = counts_[i] == call.count && keys_[i] == CallPlan::key_of(call);
    return hit ? &entries_[i] : nullptr;
  }
  /// Keeps `plan` (replacing the plan of another shape in its entry).
  void keep(const CallPlan& plan) {
    const std::size_t i = index(plan.count, plan.collective);
    entries_[i] = plan;
    counts_[i] = plan.count;
    keys_[i] = plan.key();
  }

  /// Whether a blocking call of this kind is planned: every collective but all-to-all-v
  /// (per-rank counts) and barrier (its fingerprint carries the roots digest), when it
  /// moves something (a zero count completes at once without running).
  static bool plannable(const algorithms::Call& call) {
    return call.count > 0 && call.collective != Collective::AllToAllV &&
           call.collective != Collective::Barrier && !is_point_to_point(call.collective);
  }

 private:
  static constexpr std::size_t kEntries = 64;
  /// Fibonacci hashing of (count, collective): the top 6 bits of the product.
  static std::size_t index(std::size_t count, Collective collective) {
    static_assert(kEntries == 64 && kNumCollectives <= 16);
    return ((count * 16 + static_cast<std::size_t>(collective)) * 0x9E3779B97F4A7C15ull) >> 58;
  }
  std::array<CallPlan, kEntries> entries_{};
  // Each entry's count and key beside it, in lines of their own: find reads two words.
  std::array<std::size_t, kEntries> counts_{};
  std::array<std::uint64_t, kEntries> keys_ = unused_keys();
  static std::array<std::uint64_t, kEntries> unused_keys() {
    std::array<std::uint64_t, kEntries> keys;
    keys.fill(CallPlan{}.key());
    return keys;
  }
};

}  // namespace chorus::detail
