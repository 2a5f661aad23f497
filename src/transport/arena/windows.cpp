// Shared windows; see windows.hpp.
#include "transport/arena/windows.hpp"

#include <algorithm>

namespace chorus::transport {

std::byte* WindowTable::add(std::uint64_t id, std::shared_ptr<Segment> segment, std::size_t stride,
                            std::size_t bytes, int rank) {
  std::byte* mine = segment->base() + static_cast<std::size_t>(rank) * stride;
  segment->populate(static_cast<std::size_t>(rank) * stride, bytes);  // the part this rank fills
  std::lock_guard lock(mutex_);
  windows_.push_back({id, std::move(segment), stride, bytes});
  return mine;
}

bool WindowTable::remove(const void* part, int rank) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [&](const Window& w) {
    return w.segment->base() + static_cast<std::size_t>(rank) * w.stride == part;
  });
  if (it == windows_.end()) return false;
  windows_.erase(it);
  return true;
}

WindowPlace WindowTable::find(const void* p, std::size_t bytes, int rank) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  for (const Window& w : windows_) {
    const auto begin = reinterpret_cast<std::uintptr_t>(w.segment->base()) +
                       static_cast<std::uintptr_t>(rank) * w.stride;
    if (address >= begin && address - begin <= w.bytes && bytes <= w.bytes - (address - begin)) {
      return {w.id, address - begin};
    }
  }
  return {};
}

std::byte* WindowTable::part(std::uint64_t id, int r) const {
  std::lock_guard lock(mutex_);
  for (const Window& w : windows_) {
    if (w.id == id) return w.segment->base() + static_cast<std::size_t>(r) * w.stride;
  }
  return nullptr;
}

}  // namespace chorus::transport
