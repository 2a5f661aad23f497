// A futex doorbell in shared memory: one per receiving rank. Anyone who gives
// the rank something to do (bytes in one of its rings, space in a ring it
// writes, an abort) rings it; the rank sleeps on it when it has nothing to do.
//
// No lost wake-ups: the sleeper arms (announces itself, then reads the
// sequence), checks for work once more, and sleeps only while the sequence is
// unchanged. A ringer bumps the sequence after publishing its work and issues
// FUTEX_WAKE only when someone is armed. Both sides use sequentially consistent
// operations, so either the ringer sees the sleeper armed, or the sleeper's
// read of the sequence sees the bump (and with it the work).
#pragma once

#include <cstdint>

namespace chorus::transport {

/// Lives in shared memory, zero-initialised (ftruncate) before first use.
struct alignas(64) DoorbellWord {
  std::uint32_t sequence = 0;
  std::uint32_t armed = 0;  ///< number of sleepers between arm() and disarm()
};

class Doorbell {
 public:
  Doorbell() = default;
  explicit Doorbell(DoorbellWord* word) : word_(word) {}
  bool valid() const { return word_ != nullptr; }

  /// Wakes whoever sleeps on this doorbell. Any thread or process.
  void ring() const noexcept;
  /// Announces a sleeper; returns the sequence to pass to sleep().
  std::uint32_t arm() const noexcept;
  /// Sleeps until the sequence differs from `sequence`, a wake, or `timeout_ms`.
  void sleep(std::uint32_t sequence, int timeout_ms) const noexcept;
  void disarm() const noexcept;

 private:
  DoorbellWord* word_ = nullptr;
};

}  // namespace chorus::transport
