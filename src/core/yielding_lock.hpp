// A lock for short, rarely contended critical sections on hot paths.
#pragma once

#include <sched.h>

#include <atomic>

namespace chorus {

/// Taking it is one atomic exchange and releasing it one store (a std::mutex costs two
/// read-modify-writes and ~55 instructions per lock and unlock). A thread that finds it
/// taken yields the CPU until it is free: never a busy wait, but no sleep either, so hold
/// it only around work that does not block (a std::mutex taken inside is fine).
/// Meets Lockable: use it with std::lock_guard.
class YieldingLock {
 public:
  void lock() noexcept {
    while (taken_.exchange(true, std::memory_order_acquire)) {
      while (taken_.load(std::memory_order_relaxed)) sched_yield();
    }
  }
  bool try_lock() noexcept {
    return !taken_.load(std::memory_order_relaxed) &&
           !taken_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { taken_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> taken_{false};
};

}  // namespace chorus
