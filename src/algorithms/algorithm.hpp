// The algorithm registry: every algorithm is registered with a name, a one-line
// description, the collective it implements and the cases it accepts.
// Algorithms talk only to transport::Transport, never to sockets.
#pragma once

#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "transport/transport.hpp"

#include <chorus/types.hpp>

#include <cstddef>
#include <span>
#include <string_view>

namespace chorus::algorithms {

/// One call, as the algorithm sees it. Buffers follow DESIGN.md (in place,
/// NULL where unused). `count` means, per collective:
///   all-reduce, broadcast, reduce: elements in the buffer;
///   all-gather, gather: elements each rank contributes (sendcount);
///   reduce-scatter, scatter: elements each rank receives (recvcount);
///   all-to-all: elements per peer; all-to-all-v, barrier: unused (0).
/// `op` is Sum, Prod, Max or Min: the communicator lowers Avg to Sum before calling and
/// divides the result afterwards, unless the algorithm did (see average_folded).
struct CollectiveArgs {
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
  /// When the call began running (the communicator sets it; the deadline counts from it,
  /// and the host arena paces its per-call watcher pass by it: one clock read per call, the
  /// coarse one, core/deadline.hpp, for a blocking call its caller runs).
  Clock::time_point started{};
  Deadline deadline;
  bool host_arena = false;  ///< the transport has a host arena (shm_direct algorithms need it)
  bool allow_cma = false;   ///< CHORUS_CMA, read when the communicator was created (cma algorithms)
  /// The communicator has allocated shared windows (shm_window algorithms; the same on every
  /// rank: allocation is collective and this never goes back to false).
  bool shared_windows = false;
  /// Where an algorithm that hands the call to another one names the one that ran (the
  /// communicator's last_algorithm; static storage); nullptr: nobody asks.
  std::string_view* ran_as = nullptr;
  std::size_t chunk_bytes = 0;  ///< pipelined algorithms: bytes per chunk (0: their own default)
  /// Avg lowered to Sum: an algorithm may divide its results by the rank count itself
  /// (finalize_average, while they are in cache) and then sets *average_folded; nullptr:
  /// not an average.
  bool* average_folded = nullptr;
};

struct Algorithm {
  std::string_view name;         ///< e.g. "ring"; unique within its collective
  std::string_view description;  ///< one line
  Collective collective;
  /// Whether this algorithm handles the case (nullptr: every case).
  bool (*accepts)(const CollectiveArgs& args, int nranks);
  void (*run)(transport::Transport& transport, const CollectiveArgs& args);
  /// Reduces float16/bfloat16 in fp32 itself, rounding each element once (core/reduce.hpp's
  /// rule) and dividing an average before that (algorithms/partials.hpp): the communicator
  /// hands it the caller's half-type buffers instead of widening the whole message into fp32
  /// copies first (algorithms/widen.hpp).
  bool accumulates_halves = false;
};

/// Every registered algorithm, grouped by collective.
std::span<const Algorithm> all_algorithms();

/// The algorithm named `name` for `collective`, or nullptr.
const Algorithm* find_algorithm(Collective collective, std::string_view name);

/// Picks the algorithm for a call. `override_spec` is CHORUS_ALGO: empty, a bare
/// name applied to every collective that has it ("ring"), or a comma list of
/// collective=name ("allreduce=ring,broadcast=binomial"). An override naming an
/// algorithm that declines the case falls back to the default choice.
/// Pure: same inputs, same answer, on every rank.
const Algorithm& select_algorithm(const CollectiveArgs& args, int nranks,
                                  std::string_view override_spec);

}  // namespace chorus::algorithms
