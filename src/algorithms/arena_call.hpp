// What every call in the host arena starts with, and how the rooted ones cut a message into
// rounds: inline, because every arena call runs them, and a small call's time is mostly
// the instructions it runs.
#pragma once

#include "algorithms/common.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstddef>

namespace chorus::algorithms {

/// begin_arena_call's failure: an arena algorithm ran without a host arena.
[[noreturn, gnu::cold]] void fail_without_arena();

/// The context's host arena with the call begun (fingerprint published).
inline transport::HostArena& begin_arena_call(const Call& args, const Context& ctx) {
  transport::HostArena* arena = ctx.arena;
  if (!arena) fail_without_arena();
  // Calls that did not come through a communicator (tests, nested calls) carry no start.
  const auto started = ctx.started == Clock::time_point{} ? Clock::now() : ctx.started;
  arena->begin_call(args.fingerprint, started);
  return *arena;
}

/// Elements per arena round for a rooted collective: an eighth of the `count` elements (at
/// least 512 KiB, at most a round), so that the side that writes a round and the side that
/// reads it out work at the same time instead of one after the other. Whole rounds when
/// ranks share cores (transport::HostArena::cores_shared): the other side is then often
/// not running, and each extra round can cost a scheduler slice. `count` (at least 1) when
/// one round holds the whole message.
inline std::size_t arena_pipeline_elements(std::size_t count, DataType dtype,
                                           const transport::HostArena& arena) {
  constexpr std::size_t kMinBytes = 512 * 1024;
  constexpr std::size_t kRounds = 8;
  const std::size_t round_bytes = arena.round_bytes();
  const std::size_t whole = bytes_of(count, dtype);
  // One round holds the whole message (every small call): no division.
  if (whole <= std::min(round_bytes, kMinBytes)) return std::max<std::size_t>(1, count);
  const std::size_t bytes = arena.cores_shared()
                                ? round_bytes
                                : std::min(round_bytes, std::max(kMinBytes, whole / kRounds));
  return std::max<std::size_t>(1, bytes / dtype_size(dtype));
}

}  // namespace chorus::algorithms
