// The algorithm sweep: every registered algorithm against references computed
// independently in double, over rank counts, counts, dtypes, ops, roots and in
// place / out of place.
//
// Inputs are small integers chosen per op so that every result is exact in
// every dtype (sums and min/max of values in [-4, 4]; products of ±1 and ±2
// with at most two factors of 2), so results are compared for equality.
#pragma once

#include "algorithms/algorithm.hpp"
#include "transport/transport.hpp"

#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::testing {

struct SweepCase {
  const algorithms::Algorithm* algorithm = nullptr;
  int nranks = 1;
  std::size_t count = 0;  ///< args.count; for all-to-all-v the scale of the per-peer counts
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  bool in_place = false;
  std::uint64_t seq = 0;  ///< fingerprint sequence number and data seed
};

std::string describe(const SweepCase& c);

inline constexpr int kSweepRankCounts[] = {1, 2, 3, 4, 5, 7, 8};
inline constexpr std::size_t kSweepCounts[] = {0, 1, 7, 1025};

/// The cases run on `nranks` ranks (the same list on every rank), in order:
///  - structure: every algorithm x count in kSweepCounts x in place or not x
///    every root (rooted collectives); at count 7 with every dtype x op
///    (reducing collectives), at the other counts with one (dtype, op) pair
///    rotating through all 10 x 4;
///  - types: every algorithm x every dtype x every op (reducing collectives),
///    count 1031, root n - 1, in place on alternate cases.
/// Cases an algorithm declines (algorithm_accepts, with what the context provides) are left
/// out.
std::vector<SweepCase> sweep_cases(int nranks, algorithms::Needs provided);

/// What the sweep's contexts provide: a host arena per rank (MemoryFabric::attach_arenas)
/// and cross-memory reads (threads as ranks read each other directly).
inline constexpr algorithms::Needs kSweepProvides =
    algorithms::kNeedsArena | algorithms::kNeedsCrossMemory;

/// Whether the collective carries a reduce op / a root.
bool is_reducing(Collective collective);
bool is_rooted(Collective collective);

/// Runs `c` as rank `context.rank()` in `context` (its deadline is set here) and checks the
/// result. Returns a description of each wrong element (at most a few); throws what the
/// algorithm throws.
std::vector<std::string> run_sweep_case(const algorithms::Context& context, const SweepCase& c);

}  // namespace chorus::testing
