#include "comm/run_collective.hpp"

#include "algorithms/widen.hpp"
#include "comm/validate.hpp"
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
/// Inline, and the row's run function called directly (Algorithm::execute's rule): every
/// collective's path runs it, and each call level costs a small call a tenth of its time.
[[gnu::always_inline]] inline algorithms::Outcome run_choice(CommState& comm,
                                                             const algorithms::Call& call,
                                                             algorithms::Context& context,
                                                             const algorithms::Selection& choice,
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
  const algorithms::Algorithm* other = choice.algorithm->run(call, context);
  const algorithms::Outcome outcome{
      other ? other : choice.algorithm,
      call.average && (other ? other : choice.algorithm)->folds_average(call)};
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

algorithms::Context context_for(CommState& comm, Clock::time_point started) {
  return algorithms::Context{.transport = *comm.transport,
                             .arena = comm.arena.get(),
                             .cross_memory = comm.config.cma,
                             .deadline = started + comm.config.timeout,
                             .started = started,
                             .chunk_bytes = 0,
                             .transport_rank = comm.rank,
                             .transport_size = comm.size};
}

/// Avg becomes Sum with `average` set (algorithms never see Avg); true when it did.
bool lower_average(algorithms::Call& call) {
  if (call.op != ReduceOp::Avg) return false;
  call.op = ReduceOp::Sum;
  call.average = true;
  return true;
}

/// Whether a reduction `call` (lowered) runs on wide copies of the whole message
/// (algorithms/widen.hpp): its accumulation type `wide` is wider than its dtype, and
/// `algorithm` does not accumulate half types itself. Either way each element is rounded once.
bool runs_widened(const algorithms::Call& call, DataType wide,
                  const algorithms::Algorithm& algorithm) {
  const bool halves = wide == DataType::Float32 && algorithm.folding != algorithms::Folding::None;
  return wide != call.dtype && !halves && call.count > 0;
}

/// Runs a lowered reduction that is not widened with `choice`, then divides an average the
/// algorithm left undivided.
void run_reduction(CommState& comm, const algorithms::Call& call, algorithms::Context& context,
                   const algorithms::Selection& choice, std::size_t caller_bytes, bool average) {
  const algorithms::Outcome outcome = run_choice(comm, call, context, choice, caller_bytes);
  if (average && !outcome.averaged && call.count > 0 &&
      algorithms::receives_result(call, comm.rank)) {
    finalize_average(call.recv, call.count, call.dtype, comm.size);
  }
}

/// run_collective in `context`: selects (through the selection cache) and runs.
void run_in(CommState& comm, algorithms::Call& call, algorithms::Context& context) {
  if (call.collective == Collective::Barrier && call.fingerprint.root != -1) {
    return run_barrier_after_rooted_calls(comm, call, context);
  }
  if (!has_reduce_op(call.collective)) {
    run_selected(comm, call, context);
    return;
  }
  const DataType wide = accumulation_type(call.dtype, call.op);
  const bool average = lower_average(call);
  const std::size_t caller_bytes = algorithms::selection_bytes(call);
  const algorithms::Needs provided = context.provides();
  const algorithms::Selection choice = select(comm, call, provided);
  if (runs_widened(call, wide, *choice.algorithm)) {
    algorithms::run_widened(call, comm.rank, comm.size, wide, average, [&](algorithms::Call& w) {
      run_choice(comm, w, context, select(comm, w, provided), caller_bytes);
    });
    return;
  }
  run_reduction(comm, call, context, choice, caller_bytes, average);
}

}  // namespace

void run_collective(CommState& comm, algorithms::Call& call, Clock::time_point started) {
  if (started == Clock::time_point{}) started = Clock::now();
  algorithms::Context context = context_for(comm, started);
  run_in(comm, call, context);
}

CallPlan plan_call(CommState& comm, const algorithms::Call& call) {
  CallPlan plan;
  plan.count = call.count;
  plan.collective = call.collective;
  plan.dtype = call.dtype;
  plan.op = call.op;
  plan.root = call.root;
  const BufferBytes bytes = buffer_bytes(call, comm.rank, comm.size);
  plan.needs_send = bytes.send > 0;
  plan.needs_recv = bytes.recv > 0;
  plan.fingerprint = call.fingerprint;
  plan.fingerprint.seq = 0;
  plan.run.provided = context_for(comm, {}).provides();
  plan.run.caller_bytes = algorithms::selection_bytes(call);
  algorithms::Call lowered = call;
  const bool reduces = has_reduce_op(call.collective);
  if (reduces) lower_average(lowered);
  try {
    plan.run.choice = select(comm, lowered, plan.run.provided);
  } catch (const Error&) {
    return plan;  // unused: such calls take the general path, which fails them as before
  }
  if (reduces &&
      runs_widened(lowered, accumulation_type(call.dtype, call.op), *plan.run.choice.algorithm)) {
    plan.run.choice.algorithm = nullptr;
  }
  plan.used = true;
  return plan;
}

void run_planned(CommState& comm, algorithms::Call& call, const PlannedRun& plan,
                 Clock::time_point started) {
  algorithms::Context context = context_for(comm, started);
  if (plan.choice.algorithm == nullptr || context.provides() != plan.provided) {
    return run_in(comm, call, context);
  }
  if (!has_reduce_op(call.collective)) {
    run_choice(comm, call, context, plan.choice, plan.caller_bytes);
    return;
  }
  const bool average = lower_average(call);
  run_reduction(comm, call, context, plan.choice, plan.caller_bytes, average);
}

}  // namespace chorus::detail
