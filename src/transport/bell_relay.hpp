// Shared-memory rings seen by a poll(): a rank with links of both kinds sleeps in poll() on its
// TCP descriptors and its wake eventfd, while shared-memory peers ring its futex doorbell, which
// no poll() sees. The relay is a thread that, while the rank polls, sleeps on the doorbell in
// its place and writes the eventfd when the doorbell rings, so that a shared-memory message
// ends the poll at once instead of at a timeout.
//
// Protocol (ProgressEngine::sleep): arm the doorbell (its sequence S), look for work once more,
// watch(S), poll(), unwatch(), disarm. The relay sleeps on the doorbell while the sequence is S;
// a ringer sees the rank armed, bumps the sequence and wakes every sleeper on it, the relay
// among them, which then writes the eventfd if the rank still watches. A ring between arm() and
// the relay's sleep changed the sequence, so the relay does not sleep and writes at once. At
// most one eventfd write per watch.
#pragma once

#include "transport/doorbell.hpp"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace chorus::transport {

class BellRelay {
 public:
  /// `bell` and `wake_fd` (an eventfd) must outlive the relay. No thread until the first watch.
  BellRelay(Doorbell bell, int wake_fd) : bell_(bell), wake_fd_(wake_fd) {}
  ~BellRelay();
  BellRelay(const BellRelay&) = delete;
  BellRelay& operator=(const BellRelay&) = delete;

  /// The rank is armed on the doorbell at `sequence` and is about to poll.
  void watch(std::uint32_t sequence);
  /// The poll ended: a ring from now on is the rank's own to see.
  void unwatch();

 private:
  void run();

  Doorbell bell_;
  int wake_fd_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool watching_ = false;
  bool stop_ = false;
  std::uint32_t sequence_ = 0;
  std::thread thread_;
};

}  // namespace chorus::transport
