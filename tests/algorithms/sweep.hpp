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
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::testing {

/// Where the ranks' buffers of a case lie. The rows that need shared windows run in them
/// (their own path) and, outside them, hand the call to shm_direct (Outcome::ran).
enum class Placement : std::uint8_t {
  Heap,             ///< every rank's on its heap
  Windows,          ///< every rank's in its part of the fabric's shared window
  LastRankOutside,  ///< in the window but rank n - 1's, on its heap
};

struct SweepCase {
  const algorithms::Algorithm* algorithm = nullptr;
  int nranks = 1;
  std::size_t count = 0;  ///< args.count; for all-to-all-v the scale of the per-peer counts
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  bool in_place = false;
  std::uint64_t seq = 0;  ///< fingerprint sequence number and data seed
  Placement placement = Placement::Heap;
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
///    count 1031, root n - 1, in place on alternate cases;
///  - windows, for the algorithms that need shared windows (which take only calls whose
///    larger buffer exceeds kMinWindowBytes): every dtype x op x in place or not just past
///    that size; two calls whose every rank's share spans several kWindowChunkBytes chunks
///    (in place and not); and two calls with the buffers outside the windows, on every rank
///    and on the last one only.
/// The algorithms that need shared windows run with their buffers in them (Placement) but
/// in those last two cases. Cases an algorithm declines (algorithm_accepts, with what the
/// context provides) are left out.
std::vector<SweepCase> sweep_cases(int nranks, algorithms::Needs provided);

/// What the sweep's contexts provide: a host arena per rank (MemoryFabric::attach_arenas),
/// cross-memory reads (threads as ranks read each other directly) and a shared window
/// (MemoryFabric::attach_windows).
inline constexpr algorithms::Needs kSweepProvides =
    algorithms::kNeedsArena | algorithms::kNeedsCrossMemory | algorithms::kNeedsSharedWindows;

/// Whether the algorithm needs shared windows (kNeedsSharedWindows).
bool needs_windows(const algorithms::Algorithm& algorithm);
/// Where the buffers lie, in words ("in the windows", ...).
std::string_view placement_name(Placement placement);
/// Whether the case's buffers lie in the shared window on `rank`.
bool in_window(const SweepCase& c, int rank);
/// Bytes each rank's window part needs for the buffers of every case in `cases`.
std::size_t sweep_window_bytes(const std::vector<SweepCase>& cases);

/// Whether the collective carries a reduce op / a root.
bool is_reducing(Collective collective);
bool is_rooted(Collective collective);

/// Runs `c` as rank `context.rank()` in `context` (its deadline is set here), with its
/// buffers in `window` (the rank's window part) where the case places them there, and checks
/// the result, the untouched input, the bytes past each buffer and the algorithm that ran:
/// the case's own, or shm_direct where a row that needs windows finds buffers outside them,
/// or hierarchical where a striped row finds hosts it cannot stripe.
/// Returns a description of each problem (at most a few wrong elements); throws what the
/// algorithm throws.
std::vector<std::string> run_sweep_case(const algorithms::Context& context, const SweepCase& c,
                                        std::span<std::byte> window = {});

}  // namespace chorus::testing
