// chorus-perf --tune FILE: measures the cost model's parameters
// (src/algorithms/cost_model.hpp) on the running communicator and merges them
// into FILE, which CHORUS_TUNING_FILE then points the library at.
#pragma once

#include <chorus/communicator.hpp>

#include <string>

namespace chorus::perf {

/// Every rank calls it, with CHORUS_ALGO pinning allreduce=recursive_doubling
/// (main() does). Times a local reduction (gamma), then the links, each by all-reduces of
/// 8 B and 1 MiB, and the host arena by a barrier and broadcasts where the collectives run
/// through it. On one host: the communicator's link kind (tcp under CHORUS_TRANSPORT=tcp,
/// else shm) and the arena. Across hosts (ranks grouped by host identity): the shm links and
/// the arena on a communicator of each host's ranks (every host at once; not under
/// CHORUS_TRANSPORT=tcp), then tcp on a communicator of one rank per host. Each value is
/// the slowest rank's. Rank 0 then reads FILE if it exists, replaces the measured keys,
/// writes it back (the keys measured now marked measured, the others keeping their mark, or
/// marked assumed when they are the built-in defaults) and prints them.
void run_tune(Communicator& comm, const std::string& path);

}  // namespace chorus::perf
