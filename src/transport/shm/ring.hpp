// Single-producer/single-consumer byte ring in shared memory.
//
// `head` counts every byte the producer ever wrote, `tail` every byte the
// consumer ever read (64-bit, they never wrap in practice); the ring holds
// head - tail bytes at positions (counter mod capacity). The producer publishes
// bytes with a release store of head after copying them in; the consumer
// acquires head before copying them out and releases tail afterwards, which in
// turn lets the producer reuse the space. Each side caches the other's counter
// and reloads it only when the cached value says "full" or "empty".
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::transport::shm {

/// Lives in shared memory, zero-initialised. Counters on separate cache lines.
struct RingControl {
  alignas(64) std::uint64_t head = 0;             ///< written by the producer
  alignas(64) std::uint64_t tail = 0;             ///< written by the consumer
  alignas(64) std::uint32_t producer_closed = 0;  ///< set by the producer's destructor
  std::uint32_t consumer_closed = 0;              ///< set by the consumer's destructor
};
static_assert(sizeof(RingControl) == 192);

class Ring {
 public:
  Ring() = default;
  /// `capacity` is a power of two; `data` holds capacity bytes.
  Ring(RingControl* control, std::byte* data, std::uint64_t capacity)
      : control_(control), data_(data), capacity_(capacity) {}

  /// Producer side: copies up to `bytes` bytes in; returns how many fit.
  std::size_t write(const void* source, std::size_t bytes);
  /// Consumer side: copies up to `bytes` bytes out; returns how many were there.
  std::size_t read(void* destination, std::size_t bytes);

  void close_producer() const noexcept;
  void close_consumer() const noexcept;
  /// True once the producer closed and every byte it wrote has been read.
  bool producer_gone_and_drained() const noexcept;
  bool consumer_closed() const noexcept;

  std::uint64_t capacity() const { return capacity_; }

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t cached_head_ = 0;  ///< consumer's view of head
  std::uint64_t cached_tail_ = 0;  ///< producer's view of tail
};

}  // namespace chorus::transport::shm
