// Timing and checking of one case, and the loop over the requested cases.
#pragma once

#include <chorus/communicator.hpp>

#include "collectives.hpp"
#include "options.hpp"
#include "report.hpp"

namespace chorus::perf {

/// Runs `warmup` untimed then `iters` timed iterations; the time is the mean per
/// iteration, max over ranks (an all-reduce of the local means). With `check`,
/// then refills the buffers, runs once more and counts wrong elements over all
/// ranks (summed with an all-reduce). Collective over the communicator.
Timing measure(Communicator& comm, const Case& c, bool in_place, const Options& options);

/// Every requested collective x dtype x op x size, printed through `report`.
/// Throws Error(InvalidArgument) for a root outside the communicator.
void run_benchmarks(Communicator& comm, const Options& options, Report& report);

}  // namespace chorus::perf
