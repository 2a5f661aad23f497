// Deadlines: every wait in Chorus has one (see DESIGN.md, "Nothing hangs forever").
#pragma once

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

/// Milliseconds left before `deadline`, clamped at zero, rounded up so that a
/// positive remainder never becomes a zero timeout.
inline int remaining_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

inline bool expired(Deadline deadline) { return Clock::now() >= deadline; }

}  // namespace chorus
