// SPSC byte ring; see ring.hpp for the protocol.
#include "transport/shm/ring.hpp"

#include "core/copy.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace chorus::transport::shm {
namespace {

using Counter = std::atomic_ref<std::uint64_t>;
using Flag = std::atomic_ref<std::uint32_t>;

/// Copies `bytes` bytes into the ring at counter `position`, wrapping once at most.
void copy_in(std::byte* ring, std::uint64_t capacity, std::uint64_t position, const std::byte* from,
             std::size_t bytes) {
  std::size_t offset = position & (capacity - 1);
  std::size_t first = std::min<std::size_t>(bytes, capacity - offset);
  copy_bytes(ring + offset, from, first);
  copy_bytes(ring, from + first, bytes - first);
}

void copy_out(const std::byte* ring, std::uint64_t capacity, std::uint64_t position, std::byte* to,
              std::size_t bytes) {
  std::size_t offset = position & (capacity - 1);
  std::size_t first = std::min<std::size_t>(bytes, capacity - offset);
  copy_bytes(to, ring + offset, first);
  copy_bytes(to + first, ring, bytes - first);
}

}  // namespace

std::size_t Ring::write(const void* source, std::size_t bytes) {
  std::uint64_t head = Counter(control_->head).load(std::memory_order_relaxed);
  if (head - cached_tail_ + bytes > capacity_) {
    cached_tail_ = Counter(control_->tail).load(std::memory_order_acquire);
  }
  // The counters live in shared memory: never trust them to keep 0 <= used <= capacity.
  std::uint64_t used = std::min<std::uint64_t>(head - cached_tail_, capacity_);
  std::size_t n = std::min<std::uint64_t>(bytes, capacity_ - used);
  if (n == 0) return 0;
  copy_in(data_, capacity_, head, static_cast<const std::byte*>(source), n);
  Counter(control_->head).store(head + n, std::memory_order_release);
  return n;
}

std::size_t Ring::read(void* destination, std::size_t bytes) {
  std::uint64_t tail = Counter(control_->tail).load(std::memory_order_relaxed);
  if (cached_head_ - tail < bytes) {
    cached_head_ = Counter(control_->head).load(std::memory_order_acquire);
  }
  std::size_t n = std::min<std::uint64_t>({bytes, cached_head_ - tail, capacity_});
  if (n == 0) return 0;
  copy_out(data_, capacity_, tail, static_cast<std::byte*>(destination), n);
  Counter(control_->tail).store(tail + n, std::memory_order_release);
  return n;
}

void Ring::close_producer() const noexcept {
  Flag(control_->producer_closed).store(1, std::memory_order_release);
}

void Ring::close_consumer() const noexcept {
  Flag(control_->consumer_closed).store(1, std::memory_order_release);
}

bool Ring::producer_gone_and_drained() const noexcept {
  // The flag is stored after the producer's last head update, so once it is
  // seen (acquire), head is final.
  if (Flag(control_->producer_closed).load(std::memory_order_acquire) == 0) return false;
  return Counter(control_->head).load(std::memory_order_acquire) ==
         Counter(control_->tail).load(std::memory_order_relaxed);
}

bool Ring::consumer_closed() const noexcept {
  return Flag(control_->consumer_closed).load(std::memory_order_acquire) != 0;
}

}  // namespace chorus::transport::shm
