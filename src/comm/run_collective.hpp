// Runs one collective on the thread that executes the communicator's queue.
#pragma once

#include "algorithms/algorithm.hpp"
#include "comm/comm_state.hpp"

namespace chorus::detail {

/// Lowers what algorithms do not see (avg becomes sum plus one division;
/// half types, and integers under avg, are reduced in their accumulation type,
/// see core/reduce.hpp), selects the algorithm and runs it under the
/// communicator's timeout, counted from `started` (the epoch: now). `call` carries the
/// caller's dtype and op; its fingerprint is already stamped. `call` is the caller's own
/// copy, which this changes.
void run_collective(CommState& comm, algorithms::Call& call, Clock::time_point started);

}  // namespace chorus::detail
