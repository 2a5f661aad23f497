// The algorithm registry: every algorithm is one row (Algorithm) saying what it is (name,
// description, collective), what it needs of the communicator besides a transport, what it
// costs (a function of the call's shape and the machine's measured parameters), how it
// treats half types and averages, and how it runs. A row is defined in the algorithm's own
// file and listed once in registry.def; selection, the sweep and the tools read the rows.
//
// An algorithm runs a Call (what the caller asked) in a Context (what the communicator
// lends it: the transport, the host arena, the deadline) and returns what it did (Outcome).
// Algorithms move bytes through transport::Transport and, on one host, the
// transport::HostArena they are handed; never through sockets or the links behind them.
#pragma once

#include "algorithms/cost_model.hpp"
#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "transport/transport.hpp"

#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace chorus::transport {
class HostArena;
}

namespace chorus::algorithms {

/// One call, as the algorithm sees it. Buffers follow DESIGN.md (in place,
/// NULL where unused). `count` means, per collective:
///   all-reduce, broadcast, reduce: elements in the buffer;
///   all-gather, gather: elements each rank contributes (sendcount);
///   reduce-scatter, scatter: elements each rank receives (recvcount);
///   all-to-all: elements per peer; all-to-all-v, barrier: unused (0).
/// `op` is Sum, Prod, Max or Min: the communicator lowers Avg to Sum (and sets `average`)
/// and divides the result afterwards, unless the algorithm did (Folding, Outcome).
struct Call {
  Collective collective = Collective::Barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::Uint8;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::span<const std::size_t> send_counts, send_displs, recv_counts,
      recv_displs;          ///< all-to-all-v, in elements
  Fingerprint fingerprint;  ///< stamped on every message this call sends
  bool average = false;     ///< the caller asked for Avg (lowered to Sum)
};

/// What an algorithm needs of the communicator besides a transport (a bit set).
using Needs = std::uint8_t;
inline constexpr Needs kNeedsNothing = 0;
/// The host arena: every rank of the communicator on this host, shared memory allowed.
inline constexpr Needs kNeedsArena = 1;
/// Cross-memory reads of the peers' buffers (CHORUS_CMA, not 0); only with an arena.
inline constexpr Needs kNeedsCrossMemory = 2;
/// Shared windows allocated (Communicator::alloc_shared; the same on every rank: allocation
/// is collective and this never goes back); only with an arena.
inline constexpr Needs kNeedsSharedWindows = 4;

/// What the communicator lends an algorithm for one call.
struct Context {
  transport::Transport& transport;
  /// The communicator's host arena (null without one: ranks on several hosts, or shared
  /// memory not allowed). Algorithms whose row needs it get one.
  transport::HostArena* arena = nullptr;
  bool cross_memory = false;  ///< CHORUS_CMA, read when the communicator was created
  Deadline deadline{};
  /// When the call began running (the deadline counts from it, and the host arena paces its
  /// per-call liveness pass by it); the epoch: not known (the arena reads the clock).
  Clock::time_point started{};
  std::size_t chunk_bytes = 0;  ///< pipelined algorithms: bytes per chunk (0: their own default)
  /// transport.rank() and transport.size(), asked once (a virtual call each) rather than at
  /// every use.
  int transport_rank = transport.rank();
  int transport_size = transport.size();

  int rank() const { return transport_rank; }
  int size() const { return transport_size; }
  /// What this context offers, as Needs bits.
  Needs provides() const;
  /// This context on `other` (a view of some of the ranks): same deadline, no arena.
  Context on(transport::Transport& other) const;
};

/// How a reducing algorithm treats float16/bfloat16 and averages.
enum class Folding : std::uint8_t {
  /// The communicator hands it fp32 copies of half-type calls (algorithms/widen.hpp) and
  /// divides averages.
  None,
  /// Reduces half types in fp32 itself, rounding each element once (core/reduce.hpp's rule),
  /// and divides their averages before that rounding (algorithms/partials.hpp).
  Halves,
  /// Halves, and divides every average itself (while the results are in cache).
  Averages,
};

struct Algorithm;

/// What a run did: the algorithm that ran (the selected one, or the one it handed the call
/// to) and whether it divided an average itself.
struct Outcome {
  const Algorithm* ran = nullptr;
  bool averaged = false;
};

/// A run function: runs the call and returns the algorithm it handed the call to (a cma
/// algorithm whose reads the kernel forbids, a shm_window one whose buffers lie outside the
/// windows: their shm_direct counterpart), or nullptr when it ran the call itself.
using RunFunction = const Algorithm* (*)(const Call& call, const Context& context);

struct Algorithm {
  std::string_view name;         ///< e.g. "ring"; unique within its collective
  std::string_view description;  ///< one line
  Collective collective = Collective::Barrier;
  Needs needs = kNeedsNothing;
  /// Modelled seconds of the call on the machine (cost_model.hpp); infinity rules it out.
  CostFunction cost = nullptr;
  RunFunction run = nullptr;
  Folding folding = Folding::None;
  /// Whether the algorithm takes the call's shape (nullptr: every shape); capabilities are
  /// `needs`, not this.
  bool (*accepts)(const Call& call, int nranks) = nullptr;
  /// Pipelined algorithms: the chunk that minimises the modelled time (nullptr: none).
  std::size_t (*chunk)(const CostInput& input) = nullptr;

  /// Runs the call and says what ran and whether it divided an average.
  Outcome execute(const Call& call, const Context& context) const;
  /// Whether the algorithm divides this call's average itself.
  bool folds_average(const Call& call) const;
};

/// A RunFunction for an algorithm that always runs the call itself.
template <void (*Body)(const Call&, const Context&)>
const Algorithm* runs(const Call& call, const Context& context) {
  Body(call, context);
  return nullptr;
}

/// Every registered algorithm, grouped by collective (registry.def's order).
std::span<const Algorithm* const> all_algorithms();

/// The algorithm named `name` for `collective`, or nullptr (CHORUS_ALGO and tools).
const Algorithm* find_algorithm(Collective collective, std::string_view name);

/// The rows, one per algorithm file, as registry.def lists them (rows::allreduce_ring, ...).
namespace rows {
#define CHORUS_ALGORITHM(row) extern const Algorithm row;
#include "algorithms/registry.def"
#undef CHORUS_ALGORITHM
}  // namespace rows

}  // namespace chorus::algorithms
