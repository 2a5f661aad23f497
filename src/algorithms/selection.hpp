// The parts of algorithm selection that select_algorithm (algorithm.hpp) is
// built from, public so the communicator can check CHORUS_ALGO once at start-up
// and tests can check each rule.
#pragma once

#include "algorithms/algorithm.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::algorithms {

/// One entry of CHORUS_ALGO: `name` for `collective`, or for every collective
/// that has an algorithm of that name when `collective` is empty (a bare name).
struct AlgorithmOverride {
  std::optional<Collective> collective;
  std::string name;
};

/// Parses CHORUS_ALGO: entries separated by commas, each "name" or
/// "collective=name", spaces around either ignored, empty entries skipped.
/// Throws Error(InvalidArgument) naming the entry when a collective is unknown,
/// a name is empty, or a name matches no registered algorithm (of that
/// collective, or of any collective for a bare name).
std::vector<AlgorithmOverride> parse_algorithm_override(std::string_view spec);

/// The name the overrides ask for `collective`, or "" when none does. An entry
/// naming the collective beats a bare name; among equals the last one wins.
/// Bare names only count for collectives that have an algorithm of that name.
std::string_view requested_algorithm(const std::vector<AlgorithmOverride>& overrides,
                                     Collective collective);

/// select_algorithm (algorithm.hpp) with CHORUS_ALGO already parsed: what a
/// communicator calls on every collective, so the spec is parsed once, at init.
const Algorithm& select_algorithm(const CollectiveArgs& args, int nranks,
                                  const std::vector<AlgorithmOverride>& overrides);

/// Whether `algorithm` takes the case (an algorithm without accepts() takes all).
bool algorithm_accepts(const Algorithm& algorithm, const CollectiveArgs& args, int nranks);

/// Bytes that drive the default choice: args.count elements of args.dtype
/// (per rank for all-gather/gather, per peer for all-to-all; 0 for barrier and
/// all-to-all-v).
std::size_t selection_bytes(const CollectiveArgs& args);

/// The algorithm Chorus prefers for (collective, bytes, nranks) before accepts():
///   allreduce: recursive_doubling below 64 KiB, else ring;
///   broadcast: ring from 1 MiB with more than 2 ranks, else binomial;
///   allgather: recursive_doubling while the gathered result is below 64 KiB, else ring;
///   reduce: binomial; reducescatter: ring; gather, scatter: linear;
///   alltoall, alltoallv: pairwise; barrier: dissemination.
/// Throws Error(InvalidUsage) for send and recv, which have no algorithms.
std::string_view preferred_algorithm(Collective collective, std::size_t bytes, int nranks);

/// The preferred algorithm if it accepts the case, else the first registered
/// algorithm of the collective that does. Throws Error(InternalError) if none does.
const Algorithm& default_algorithm(const CollectiveArgs& args, int nranks);

}  // namespace chorus::algorithms
