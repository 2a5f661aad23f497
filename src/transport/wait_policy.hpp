// How a rank waits for its peers: poll a flag, then yield the core, then sleep.
//
// Polling a shared flag notices a peer in ~0.2 µs, but being woken from a sleep
// costs ~50 µs on a virtual machine. While every rank of the host has a core,
// a waiter polls for a while (the peer is running and will soon post). When ranks
// outnumber the cores, polling only keeps the rank being waited for off its core:
// the waiter yields at once, for up to a millisecond, and only then sleeps. When they
// outnumber the cores many times over (more than kCrowdedRanksPerCpu per CPU), a yield
// mostly hands the core to another waiter that yields in turn, and the awaited rank waits
// behind all of them: the waiter sleeps at once, and the rank it waits for wakes it.
#pragma once

#include "core/deadline.hpp"

#include <chrono>

namespace chorus::transport {

/// Tells the CPU this thread is spinning (x86 `pause`, Arm `yield`).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Past this many ranks per CPU, waits sleep without yielding first.
inline constexpr int kCrowdedRanksPerCpu = 8;

struct WaitPolicy {
  std::chrono::microseconds spin{20};   ///< polling from the start of a wait
  std::chrono::microseconds yield{30};  ///< then sched_yield() until spin + yield, then sleep
  bool cores_shared = false;            ///< more ranks on this host than CPUs (set by for_counts)

  /// The policy for `ranks_on_host` ranks on this host: the larger of that and the
  /// launcher's LOCAL_WORLD_SIZE, against the CPUs this process may run on
  /// (sched_getaffinity). CHORUS_SPIN_US and CHORUS_YIELD_US override either phase;
  /// malformed values throw Error(InvalidArgument).
  static WaitPolicy for_host(int ranks_on_host);
  /// The same rule with the CPU count given (pure; for tests).
  static WaitPolicy for_counts(int ranks_on_host, int cpus);
};

/// One wait's place in a WaitPolicy, by time since the wait (or the last progress) began.
class Backoff {
 public:
  enum class Action { Spin, Yield, Sleep };
  Backoff(const WaitPolicy& policy, Clock::time_point start) : policy_(policy), start_(start) {}
  Action next(Clock::time_point now) const {
    const auto waited = now - start_;
    if (waited < policy_.spin) return Action::Spin;
    if (waited < policy_.spin + policy_.yield) return Action::Yield;
    return Action::Sleep;
  }
  /// Progress was made: poll again.
  void restart(Clock::time_point now) { start_ = now; }

 private:
  WaitPolicy policy_;
  Clock::time_point start_;
};

}  // namespace chorus::transport
