// Futex doorbell; see doorbell.hpp for the protocol.
#include "transport/doorbell.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <ctime>

namespace chorus::transport {
namespace {

using Word = std::atomic_ref<std::uint32_t>;

// Process-shared futexes: no FUTEX_PRIVATE_FLAG, the word lives in a shared mapping.
void futex_wake_all(std::uint32_t* address) noexcept {
  ::syscall(SYS_futex, address, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::uint32_t* address, std::uint32_t expected, int timeout_ms) noexcept {
  timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1'000'000L};
  // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again".
  ::syscall(SYS_futex, address, FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

}  // namespace

// The fence pairs with arm()'s: either this load sees the sleeper armed, or the
// sleeper's check after arm() sees the work published before this fence. Only an
// armed doorbell has its shared sequence word written, so ranks that post to each
// other without sleeping never contend for that cache line.
// (CHORUS_DOORBELL_FENCES: doorbell.hpp.)

void Doorbell::ring() const noexcept {
#if CHORUS_DOORBELL_FENCES
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (Word(word_->armed).load(std::memory_order_relaxed) == 0) return;
  Word(word_->sequence).fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&word_->sequence);
#else
  Word(word_->sequence).fetch_add(1, std::memory_order_seq_cst);
  if (Word(word_->armed).load(std::memory_order_seq_cst) != 0) futex_wake_all(&word_->sequence);
#endif
}

void Doorbell::ring_both_armed(const Doorbell& first, const Doorbell& second) noexcept {
#if CHORUS_DOORBELL_FENCES
  // ring_both fenced already.
  for (const Doorbell* bell : {&first, &second}) {
    if (Word(bell->word_->armed).load(std::memory_order_relaxed) == 0) continue;
    Word(bell->word_->sequence).fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&bell->word_->sequence);
  }
#else
  first.ring();
  second.ring();
#endif
}

std::uint32_t Doorbell::arm() const noexcept {
  Word(word_->armed).fetch_add(1, std::memory_order_seq_cst);
#if CHORUS_DOORBELL_FENCES
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  return Word(word_->sequence).load(std::memory_order_seq_cst);
}

void Doorbell::sleep(std::uint32_t sequence, int timeout_ms) const noexcept {
  if (timeout_ms <= 0) return;
  if (Word(word_->sequence).load(std::memory_order_seq_cst) != sequence) return;
  futex_wait(&word_->sequence, sequence, timeout_ms);
}

void Doorbell::disarm() const noexcept {
  Word(word_->armed).fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace chorus::transport
