// Shared windows: memory a communicator allocated for its ranks in one host-shared
// segment (Communicator::alloc_shared), so that collectives on buffers inside it can
// read and write the peers' buffers directly instead of going through the arena.
//
// A window is one segment of size * stride bytes; rank r's part starts at r * stride.
// Every rank with a part maps the whole segment, so rank r finds rank j's part at its
// own mapping's base + j * stride. Windows are numbered in allocation order (a
// collective call: every rank takes the next id, also one that asked for no bytes),
// so a window's id is the same on every rank.
// Freeing is local: a rank unmaps its mapping when it frees its part; the memory
// returns to the system when the last rank has. A rank that freed window w never
// names w again, so a call in which every rank names w finds it mapped everywhere.
#pragma once

#include "transport/arena/segment.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace chorus::transport::shm {
class Segment;  // transport/arena/segment.hpp
}  // namespace chorus::transport::shm

namespace chorus::transport {

/// Where a buffer lies in a window: its id and its byte offset inside the owner's part.
struct WindowPlace {
  std::uint64_t id = 0;  ///< 0: in no window
  std::uint64_t offset = 0;
};

class WindowTable {
 public:
  /// The id of a window every rank just allocated: the next number. Call once per
  /// allocation on every rank, before add() on the ranks that keep a part.
  std::uint64_t next_id() { return ids_.fetch_add(1, std::memory_order_relaxed) + 1; }
  /// Registers a mapped window; `stride` is the distance between two ranks' parts and
  /// `bytes` this rank's part (its page tables are filled in). Returns this rank's part.
  std::byte* add(std::uint64_t id, std::shared_ptr<Segment> segment, std::size_t stride,
                 std::size_t bytes, int rank);
  /// Forgets and unmaps the window whose part for `rank` starts at `part` (a call still
  /// using it is the caller's error, as with free()). False when `part` starts no part.
  bool remove(const void* part, int rank);
  /// Where `bytes` bytes at `p` lie, when they lie wholly inside `rank`'s part of a window.
  WindowPlace find(const void* p, std::size_t bytes, int rank) const;
  /// Rank `r`'s part of window `id`, or nullptr when this rank has no such window.
  std::byte* part(std::uint64_t id, int r) const;
  /// Whether a window was ever allocated (never goes back to false: selection uses it; the
  /// same on every rank, since every rank takes every id).
  bool ever_used() const { return ids_.load(std::memory_order_relaxed) > 0; }

 private:
  struct Window {
    std::uint64_t id;
    std::shared_ptr<Segment> segment;
    std::size_t stride;
    std::size_t bytes;  ///< this rank's part
  };
  mutable std::mutex mutex_;
  std::vector<Window> windows_;
  std::atomic<std::uint64_t> ids_{0};  ///< ids handed out so far
};

}  // namespace chorus::transport
