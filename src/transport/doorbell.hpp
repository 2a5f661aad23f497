// A futex doorbell in shared memory: one per receiving rank. Anyone who gives
// the rank something to do (bytes in one of its rings, space in a ring it
// writes, an abort) rings it; the rank sleeps on it when it has nothing to do.
//
// No lost wake-ups: the sleeper arms (announces itself, a fence, then reads the
// sequence), checks for work once more, and sleeps only while the sequence is
// unchanged. A ringer publishes its work, fences, and only when someone is armed
// bumps the sequence and issues FUTEX_WAKE. The two sequentially consistent
// fences make it a Dekker handshake: either the ringer sees the sleeper armed (and
// the bump fails or ends the sleep), or the sleeper's check sees the work. A ring
// with nobody armed writes nothing shared.
#pragma once

#include <atomic>
#include <cstdint>

// ThreadSanitizer does not model fences (and GCC warns about them there): under it every
// ring bumps the sequence first, the handshake's fence-free form (the sequence and `armed`
// are then the Dekker pair, all four operations sequentially consistent).
#if defined(__SANITIZE_THREAD__)
#define CHORUS_DOORBELL_FENCES 0
#else
#define CHORUS_DOORBELL_FENCES 1
#endif

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
  /// ring() on both, with one fence. Inline: every post of the host arena rings two, and
  /// mostly nobody sleeps on either.
  static void ring_both(const Doorbell& first, const Doorbell& second) noexcept {
#if CHORUS_DOORBELL_FENCES
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (first.armed() == 0 && second.armed() == 0) return;
#endif
    ring_both_armed(first, second);
  }
  /// Announces a sleeper; returns the sequence to pass to sleep().
  std::uint32_t arm() const noexcept;
  /// Sleeps until the sequence differs from `sequence`, a wake, or `timeout_ms`.
  void sleep(std::uint32_t sequence, int timeout_ms) const noexcept;
  void disarm() const noexcept;

 private:
  /// Sleepers armed now (a relaxed load: ring_both's fence orders it).
  std::uint32_t armed() const noexcept {
    return std::atomic_ref<std::uint32_t>(word_->armed).load(std::memory_order_relaxed);
  }
  /// ring_both after its fence, when a sleeper may be armed on either.
  static void ring_both_armed(const Doorbell& first, const Doorbell& second) noexcept;

  DoorbellWord* word_ = nullptr;
};

}  // namespace chorus::transport
