// How much shared memory a host's ranks get, as a function of how many share the host
// (n; a sub-communicator counts its parent's ranks on the host, MeshOptions::shm_sized_for).
// Pure arithmetic: the callers add the environment's overrides.
//
// Up to 8 ranks on a host nothing shrinks: 1 MiB per ring, 4 MiB of arena halves and 64 lanes
// of 4 KiB per rank. Past that each part is the largest power of two (between its cap and its
// floor) for which the host's whole part fits a fixed budget:
//
//   rings (one per ordered pair)  n (n - 1) x ring   <= 64 MiB   ring in [256 B, 1 MiB]
//   arena halves (one slot/rank)  n x slot           <= 32 MiB   slot in [8 KiB, 4 MiB]
//   arena lanes  (64 per rank)    n x 64 x lane      <= 16 MiB   lane in [64 B, 4 KiB]
//
// so a host's shared memory stays near 112 MiB, plus the rings' control lines (192 B per pair)
// and the arena's flag lines (4160 B per rank), until the floors take over (rings past 512
// ranks, lanes past 4096). A slot also holds at least 128 bytes per rank (a round carries one
// 8-byte element per rank). Smaller rings cost a sender how far it may run ahead of its receiver
// and a large message more pieces; smaller lanes send small rounds of more bytes through the two
// alternating halves instead (no running ahead). At many ranks per host large messages run in
// the arena, and most calls are tiny rounds, which live in the flag lines and do not shrink.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::transport::shm_budget {

inline constexpr std::uint64_t kRingCap = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kRingFloor = 256;
inline constexpr std::uint64_t kHostRingBudget = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kSlotCap = std::uint64_t{4} << 20;
inline constexpr std::uint64_t kSlotFloor = std::uint64_t{8} << 10;
inline constexpr std::uint64_t kHostSlotBudget = std::uint64_t{32} << 20;
inline constexpr std::uint64_t kLaneCap = 4096;
inline constexpr std::uint64_t kLaneFloor = 64;
inline constexpr std::uint64_t kHostLaneBudget = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kLanesPerRank = 64;

/// The largest power of two from `floor` to `cap` (both powers of two) of which `count` fit in
/// `budget`; `floor` when none does.
constexpr std::uint64_t fit_power_of_two(std::uint64_t cap, std::uint64_t floor,
                                         std::uint64_t count, std::uint64_t budget) {
  std::uint64_t bytes = cap;
  while (bytes > floor && bytes * count > budget) bytes /= 2;
  return bytes;
}

constexpr std::uint64_t ranks_of(int host_ranks) {
  return host_ranks < 1 ? 1 : static_cast<std::uint64_t>(host_ranks);
}

/// Bytes of each shared-memory ring (one per ordered pair of the host's ranks).
constexpr std::uint64_t ring_bytes(int host_ranks) {
  const std::uint64_t n = ranks_of(host_ranks);
  return fit_power_of_two(kRingCap, kRingFloor, n * (n - 1), kHostRingBudget);
}

/// Bytes of each rank's two arena halves together.
constexpr std::uint64_t arena_slot_bytes(int host_ranks) {
  const std::uint64_t n = ranks_of(host_ranks);
  const std::uint64_t fitted = fit_power_of_two(kSlotCap, kSlotFloor, n, kHostSlotBudget);
  return fitted > 128 * n ? fitted : 128 * n;
}

/// Bytes of each of a rank's kLanesPerRank arena lanes.
constexpr std::uint64_t arena_lane_bytes(int host_ranks) {
  const std::uint64_t n = ranks_of(host_ranks);
  return fit_power_of_two(kLaneCap, kLaneFloor, n * kLanesPerRank, kHostLaneBudget);
}

}  // namespace chorus::transport::shm_budget
