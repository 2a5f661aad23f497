// Runs one collective on the thread that executes the communicator's queue.
#pragma once

#include "algorithms/algorithm.hpp"
#include "comm/call_plan.hpp"
#include "comm/comm_state.hpp"

namespace chorus::detail {

/// Lowers what algorithms do not see (avg becomes sum plus one division;
/// half types, and integers under avg, are reduced in their accumulation type,
/// see core/reduce.hpp), selects the algorithm and runs it under the
/// communicator's timeout, counted from `started` (the epoch: now). `call` carries the
/// caller's dtype and op; its fingerprint is already stamped. `call` is the caller's own
/// copy, which this changes.
void run_collective(CommState& comm, algorithms::Call& call, Clock::time_point started);

/// The plan of `call`'s shape (call_plan.hpp): `call` passed validate_collective on this
/// rank and carries its fingerprint (the seq is not read). A plan left unused
/// (CallPlan::used false) when no algorithm accepts the call: its calls take
/// run_collective, which fails them.
CallPlan plan_call(CommState& comm, const algorithms::Call& call);

/// run_collective for a call of a planned shape, with the plan's choice when the
/// communicator still offers what it was made for (else as run_collective). `started`: when
/// the call was issued (not the epoch).
void run_planned(CommState& comm, algorithms::Call& call, const PlannedRun& plan,
                 Clock::time_point started);

}  // namespace chorus::detail
