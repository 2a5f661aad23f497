// The collective ledger: every logical collective a rank issues on a mesh group, counted.
//
// The communicating functions of the training layer (autograd.hpp) record one entry per
// logical call — one all-gather is one entry whatever algorithm runs underneath — so a test
// can assert a step's communication exactly (docs/parallel.md): a hidden extra all-gather
// fails a test, not a benchmark. Recording is off until enable(); a disabled ledger costs one
// atomic load per call. Thread-safe (autograd may run backward on another thread).
//
// Bytes are those of the logical operation on this rank: the buffer of an all-reduce or a
// broadcast, the gathered (full) tensor of an all-gather, the full input of a reduce-scatter,
// this rank's send buffer of an all-to-all(-v), the message of a send or receive.
#pragma once

#include <chorus/export.hpp>

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::train {

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Broadcast,
  Send,
  Recv
};

/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_v", "broadcast",
/// "send", "recv".
CHORUS_EXPORT std::string_view to_string(CollectiveKind kind) noexcept;

/// One logical collective.
struct LedgerEntry {
  std::string group;  ///< the mesh group's name ("tp", "dp_cp", ...)
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::size_t bytes = 0;
  bool operator==(const LedgerEntry&) const = default;
};

/// The calls and bytes of one (group, kind).
struct LedgerTotal {
  std::size_t calls = 0;
  std::size_t bytes = 0;
  bool operator==(const LedgerTotal&) const = default;
};

using LedgerTotals = std::map<std::pair<std::string, CollectiveKind>, LedgerTotal>;

class CHORUS_EXPORT CollectiveLedger {
 public:
  /// Starts recording (entries recorded before are kept).
  void enable() { enabled_.store(true, std::memory_order_relaxed); }
  void disable() { enabled_.store(false, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  /// Adds an entry when enabled.
  void record(std::string_view group, CollectiveKind kind, std::size_t bytes);
  /// The entries in the order they were recorded.
  std::vector<LedgerEntry> entries() const;
  /// The entries summed per (group, kind).
  LedgerTotals totals() const;
  /// Returns the entries and forgets them (one step's worth, for a per-step assertion).
  std::vector<LedgerEntry> take();
  void clear();

 private:
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::vector<LedgerEntry> entries_;
};

/// "tp all_gather 96 B; dp all_reduce 8 B": entries as a line for test failure messages.
CHORUS_EXPORT std::string describe(const std::vector<LedgerEntry>& entries);

}  // namespace chorus::train
