// coarse_now() (core/deadline.hpp) against Clock::now(): the same clock (same epoch), never
// ahead of it and only a few ticks behind (the kernel updates it at a tick, and a tickless
// CPU can be a tick late: ~5 ms seen here with 4 ms ticks; 100 ms allowed for loaded
// machines), never going backwards, and moving on as time passes.
#include "core/deadline.hpp"

#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

std::chrono::nanoseconds coarse_tick() {
  timespec res{};
  clock_getres(CLOCK_MONOTONIC_COARSE, &res);
  return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
}

TEST(CoarseNow, IsTheSteadyClockAFewTicksBehind) {
  const auto tick = coarse_tick();
  ASSERT_GT(tick.count(), 0);
  for (int i = 0; i < 1000; ++i) {
    const auto fine_before = Clock::now();
    const auto coarse = coarse_now();
    const auto fine_after = Clock::now();
    EXPECT_LE(coarse, fine_after);
    EXPECT_GE(coarse, fine_before - tick - 100ms) << "tick " << tick.count() << " ns";
  }
}

TEST(CoarseNow, NeverGoesBackwardsAndAdvances) {
  auto last = coarse_now();
  const auto first = last;
  const auto until = Clock::now() + 4 * coarse_tick() + 20ms;
  while (Clock::now() < until) {
    const auto now = coarse_now();
    EXPECT_GE(now, last);
    last = now;
    std::this_thread::sleep_for(100us);
  }
  EXPECT_GT(last, first);
}

}  // namespace
}  // namespace chorus
