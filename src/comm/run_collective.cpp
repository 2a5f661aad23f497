#include "comm/run_collective.hpp"

#include "algorithms/widen.hpp"
#include "core/log.hpp"
#include "core/reduce.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::detail {
namespace {

/// Logs (collective, size bucket = bit_width(bytes), algorithm) at INFO the first time it
/// occurs, with the candidates' modelled times (algorithms::explain_selection); `bytes` is the
/// caller's (selection_bytes of the caller's arguments).
void log_choice_once(CommState& comm, const algorithms::Call& args, algorithms::Needs provided,
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
          algorithms::explain_selection(args, provided, comm.selection, comm.algorithm_overrides) +
          ")");
}

algorithms::Selection select(CommState& comm, const algorithms::Call& call,
                             algorithms::Needs provided) {
  return comm.selection_cache.select(call, provided, comm.selection, comm.algorithm_overrides);
}

/// Runs `call` with `choice` in `context` (its chunk set here) and returns what ran;
/// `caller_bytes` is what the log reports (the caller's message, also when `call` is widened).
algorithms::Outcome run_choice(CommState& comm, const algorithms::Call& call,
                               algorithms::Context& context, const algorithms::Selection& choice,
                               std::size_t caller_bytes) {
  context.chunk_bytes = choice.chunk_bytes;
  // Only the running step writes last_algorithm (steps are serialised by the executor), so
  // it reads it without the lock and takes the lock only to change it or to log.
  if (comm.last_algorithm.data() != choice.algorithm->name.data() || log_enabled(LogLevel::Info)) {
    std::lock_guard lock(comm.error_mutex);
    log_choice_once(comm, call, context.provides(), choice, caller_bytes);
    comm.last_algorithm = choice.algorithm->name;
  }
  // The flight recorder's entry for this call names the algorithm (a registered one's name,
  // which lives as long as the registry); the one that ran instead, if another did.
  comm.executor->note_algorithm(&choice.algorithm->name);
  const algorithms::Outcome outcome = choice.algorithm->execute(call, context);
  if (outcome.ran != choice.algorithm) {
    comm.executor->note_algorithm(&outcome.ran->name);
    std::lock_guard lock(comm.error_mutex);
    comm.last_algorithm = outcome.ran->name;
  }
  return outcome;
}

algorithms::Outcome run_selected(CommState& comm, const algorithms::Call& call,
                                 algorithms::Context& context) {
  return run_choice(comm, call, context, select(comm, call, context.provides()),
                    algorithms::selection_bytes(call));
}

/// A barrier that carries a roots digest: a Mismatch also names this rank's rooted calls.
void run_barrier_after_rooted_calls(CommState& comm, const algorithms::Call& call,
                                    algorithms::Context& context) {
  try {
    run_selected(comm, call, context);
  } catch (const Error& error) {
    if (error.status() != Status::Mismatch) throw;
    throw Error(Status::Mismatch,
                std::string(error.what()) +
                    "; ranks whose roots digests differ passed different roots to a rooted call "
                    "since the previous barrier; this rank's rooted calls: " +
                    comm.roots_digest.calls_before(call.fingerprint.seq));
  }
}

}  // namespace

void run_collective(CommState& comm, algorithms::Call& call, Clock::time_point started) {
  if (started == Clock::time_point{}) started = Clock::now();
  algorithms::Context context{*comm.transport};
  context.arena = comm.arena.get();
  context.host_arena = comm.host_arena.get();
  context.host_members = comm.host_members;
  context.cross_memory = comm.config.cma;
  context.started = started;
  context.deadline = started + comm.config.timeout;
  if (call.collective == Collective::Barrier && call.fingerprint.root != -1) {
    return run_barrier_after_rooted_calls(comm, call, context);
  }
  if (!has_reduce_op(call.collective)) {
    run_selected(comm, call, context);
    return;
  }
  const bool average = call.op == ReduceOp::Avg;
  const DataType wide = accumulation_type(call.dtype, call.op);
  if (average) {
    call.op = ReduceOp::Sum;
    call.average = true;
  }
  const std::size_t caller_bytes = algorithms::selection_bytes(call);
  const algorithms::Needs provided = context.provides();
  const algorithms::Selection choice = select(comm, call, provided);
  // Half types reach an algorithm that accumulates them in fp32 itself as they are (it also
  // divides their average); other calls whose accumulation type is wider, and integer
  // averages, run on wide copies of the whole message (algorithms/widen.hpp). Either way each
  // element is rounded once.
  const bool halves =
      wide == DataType::Float32 && choice.algorithm->folding != algorithms::Folding::None;
  if (wide != call.dtype && !halves && call.count > 0) {
    algorithms::run_widened(call, comm.rank, comm.size, wide, average, [&](algorithms::Call& w) {
      run_choice(comm, w, context, select(comm, w, provided), caller_bytes);
    });
    return;
  }
  const algorithms::Outcome outcome = run_choice(comm, call, context, choice, caller_bytes);
  if (average && !outcome.averaged && call.count > 0 &&
      algorithms::receives_result(call, comm.rank)) {
    finalize_average(call.recv, call.count, call.dtype, comm.size);
  }
}

}  // namespace chorus::detail
