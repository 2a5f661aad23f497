#include "comm/run_collective.hpp"

#include "algorithms/widen.hpp"
#include "core/log.hpp"
#include "core/reduce.hpp"
#include "transport/shm/host_arena.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::detail {
namespace {

/// Logs (collective, size bucket = bit_width(bytes), algorithm) at INFO the first time it
/// occurs, with the candidates' modelled times (algorithms::explain_selection); `bytes` is the
/// caller's (selection_bytes of the caller's arguments).
void log_choice_once(CommState& comm, const algorithms::CollectiveArgs& args,
                     const algorithms::Selection& choice, std::size_t bytes) {
  if (!log_enabled(LogLevel::Info)) return;
  const int bucket = static_cast<int>(std::bit_width(bytes));
  auto key = std::tuple(static_cast<int>(args.collective), bucket, choice.algorithm->name);
  if (!comm.logged_choices.insert(key).second) return;
  std::string chunk = choice.chunk_bytes ? ", chunk " + std::to_string(choice.chunk_bytes) : "";
  log(LogLevel::Info,
      std::string(to_string(args.collective)) + " of " + std::to_string(bytes) +
          " bytes (bucket < " + std::to_string(std::uint64_t{1} << bucket) + ") uses algorithm " +
          std::string(choice.algorithm->name) + chunk + " (" +
          algorithms::explain_selection(args, comm.selection, comm.algorithm_overrides) + ")");
}

algorithms::Selection select(CommState& comm, const algorithms::CollectiveArgs& args) {
  return comm.selection_cache.select(args, comm.selection, comm.algorithm_overrides);
}

/// Runs `args` (the caller's own copy: it sets the chunk size and ran_as in it) with `choice`;
/// `caller_bytes` is what the log reports (the caller's message, also when `args` is widened).
void run_choice(CommState& comm, algorithms::CollectiveArgs& args,
                const algorithms::Selection& choice, std::size_t caller_bytes) {
  args.chunk_bytes = choice.chunk_bytes;
  // Only the running step writes last_algorithm (steps are serialised by the executor), so
  // it reads it without the lock and takes the lock only to change it or to log.
  if (comm.last_algorithm.data() != choice.algorithm->name.data() || log_enabled(LogLevel::Info)) {
    std::lock_guard lock(comm.error_mutex);
    log_choice_once(comm, args, choice, caller_bytes);
    comm.last_algorithm = choice.algorithm->name;
  }
  // The flight recorder's entry for this call names the algorithm (a registered one's name,
  // which lives as long as the registry); the one that ran instead, if another did.
  comm.executor->note_algorithm(&choice.algorithm->name);
  std::string_view ran = choice.algorithm->name;  // a cma algorithm may run shm_direct instead
  args.ran_as = &ran;
  choice.algorithm->run(*comm.transport, args);
  args.ran_as = nullptr;  // `ran` ends here
  if (ran.data() == choice.algorithm->name.data()) return;
  if (const algorithms::Algorithm* other = algorithms::find_algorithm(args.collective, ran)) {
    comm.executor->note_algorithm(&other->name);
  }
  std::lock_guard lock(comm.error_mutex);
  comm.last_algorithm = ran;
}

void run_selected(CommState& comm, algorithms::CollectiveArgs& args) {
  run_choice(comm, args, select(comm, args), algorithms::selection_bytes(args));
}

/// A barrier that carries a roots digest: a Mismatch also names this rank's rooted calls.
void run_barrier_after_rooted_calls(CommState& comm, algorithms::CollectiveArgs& args) {
  try {
    run_selected(comm, args);
  } catch (const Error& error) {
    if (error.status() != Status::Mismatch) throw;
    throw Error(Status::Mismatch,
                std::string(error.what()) +
                    "; ranks whose roots digests differ passed different roots to a rooted call "
                    "since the previous barrier; this rank's rooted calls: " +
                    comm.roots_digest.calls_before(args.fingerprint.seq));
  }
}

}  // namespace

void run_collective(CommState& comm, algorithms::CollectiveArgs& args) {
  if (args.started == Clock::time_point{}) args.started = Clock::now();
  args.deadline = args.started + comm.config.timeout;
  transport::shm::HostArena* arena = comm.transport->host_arena();
  args.host_arena = arena != nullptr;
  args.allow_cma = comm.config.cma;
  args.shared_windows = arena && arena->windows().ever_used();
  if (args.collective == Collective::Barrier && args.fingerprint.root != -1) {
    return run_barrier_after_rooted_calls(comm, args);
  }
  if (!has_reduce_op(args.collective)) return run_selected(comm, args);
  const bool average = args.op == ReduceOp::Avg;
  const DataType wide = accumulation_type(args.dtype, args.op);
  if (average) args.op = ReduceOp::Sum;
  bool folded = false;
  if (average) args.average_folded = &folded;
  const std::size_t caller_bytes = algorithms::selection_bytes(args);
  const algorithms::Selection choice = select(comm, args);
  // Half types reach an algorithm that accumulates them in fp32 itself as they are (it also
  // divides an average); other calls whose accumulation type is wider, and integer averages,
  // run on wide copies of the whole message (algorithms/widen.hpp). Either way each element
  // is rounded once.
  const bool halves = wide == DataType::Float32 && choice.algorithm->accumulates_halves;
  if (wide != args.dtype && !halves && args.count > 0) {
    algorithms::run_widened(
        args, comm.rank, comm.size, wide, average,
        [&](algorithms::CollectiveArgs& w) { run_choice(comm, w, select(comm, w), caller_bytes); });
    return;
  }
  run_choice(comm, args, choice, caller_bytes);
  // An algorithm that accumulates halves divides an average before it rounds (one rank: the
  // sum is the input; nothing to divide).
  if (average && !folded && wide == args.dtype && args.count > 0 &&
      algorithms::receives_result(args, comm.rank)) {
    finalize_average(args.recv, args.count, args.dtype, comm.size);
  }
}

}  // namespace chorus::detail
