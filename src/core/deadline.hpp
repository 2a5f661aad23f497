// Deadlines: every wait in Chorus has one (see DESIGN.md, "Nothing hangs forever").
#pragma once

#include <time.h>

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// The steady clock's time at its last tick (CLOCK_MONOTONIC_COARSE: same epoch, never
/// ahead, a few milliseconds behind: the tick, 1-4 ms, and a tickless CPU's lateness; ~7 ns
/// against ~34 ns for Clock::now() here). For what a few milliseconds do not change: the
/// start of a call whose timeout is seconds, a flight-recorder stamp.
inline Clock::time_point coarse_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

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
