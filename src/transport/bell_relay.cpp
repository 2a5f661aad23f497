// The doorbell relay (bell_relay.hpp).
#include "transport/bell_relay.hpp"

#include <unistd.h>

namespace chorus::transport {
namespace {

/// The longest single sleep on the doorbell: the relay then looks whether it still watches
/// (a sleep is also ended by the rank's own unwatch, see ~BellRelay, and by every ring).
constexpr int kRelaySleepMs = 50;

}  // namespace

BellRelay::~BellRelay() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_one();
  if (!thread_.joinable()) return;
  // End a sleep on the doorbell: a ring wakes sleepers only while someone is armed.
  const std::uint32_t ignored = bell_.arm();
  (void)ignored;
  bell_.ring();
  bell_.disarm();
  thread_.join();
}

void BellRelay::watch(std::uint32_t sequence) {
  {
    std::lock_guard lock(mutex_);
    watching_ = true;
    sequence_ = sequence;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_one();
}

void BellRelay::unwatch() {
  std::lock_guard lock(mutex_);
  watching_ = false;
}

void BellRelay::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || watching_; });
    if (stop_) return;
    const std::uint32_t sequence = sequence_;
    lock.unlock();
    bell_.sleep(sequence, kRelaySleepMs);  // returns at once if the bell rang since the arm
    lock.lock();
    if (stop_) return;
    // Rung, or a sleep that timed out while the rank still polls: wake its poll either way (a
    // spurious wake costs the rank one look at its links, as its own 50 ms liveness wake does).
    if (watching_) {
      watching_ = false;
      const std::uint64_t one = 1;
      ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
      (void)ignored;
    }
  }
}

}  // namespace chorus::transport
