// Communicator::alloc_shared / free_shared: host-shared windows (transport/arena/windows.hpp).
//
// With a host arena (every rank on this host, shared memory allowed), one segment holds
// every rank's part: the ranks agree on the largest request (an all-reduce), rank 0
// creates the segment and broadcasts its locator, every rank that asked for bytes maps it,
// the ranks agree that all mappings worked (an all-reduce) and rank 0 withdraws it.
// Every rank then takes the table's next window id, so ids stay aligned, and the ranks
// with a part register it under that id. Without an arena the memory is ordinary, and no
// rank communicates.
#include "bootstrap/auth.hpp"
#include "comm/comm_state.hpp"
#include "transport/arena/host_arena.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace chorus {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPartAlignment = 4096;  ///< parts start on their own pages
constexpr std::size_t kNameBytes = 96;

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

void* alloc_plain(detail::CommState& s, std::size_t bytes) {
  void* p = std::aligned_alloc(kAlignment, round_up(bytes, kAlignment));
  if (!p)
    throw Error(Status::SystemError,
                "alloc_shared: out of memory for " + std::to_string(bytes) + " bytes");
  std::lock_guard lock(s.shared_mutex);
  s.plain_shared.push_back(p);
  return p;
}

}  // namespace

void* Communicator::alloc_shared(std::size_t bytes) {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  detail::CommState& s = *state_;
  transport::HostArena* arena = s.arena.get();
  try {
    require_argument(bytes <= std::numeric_limits<std::size_t>::max() / 2,
                     "alloc_shared: " + std::to_string(bytes) + " bytes is too large");
    if (!arena) return bytes == 0 ? nullptr : alloc_plain(s, bytes);
    std::uint64_t most = bytes;
    all_reduce(&most, &most, 1, DataType::Uint64, ReduceOp::Max);
    if (most == 0) return nullptr;
    const std::size_t stride = round_up(most, kPartAlignment);
    if (stride > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(s.size)) {
      throw Error(Status::InvalidArgument, "alloc_shared: " + std::to_string(s.size) +
                                               " parts of " + std::to_string(most) +
                                               " bytes overflow the address space");
    }
    // Rank 0 creates the segment; an empty name tells the others it could not.
    std::array<char, kNameBytes> name{};
    std::shared_ptr<transport::Segment> segment;
    std::string failure;
    if (s.rank == 0) {
      try {
        segment = transport::Segment::create("chorus-w-" + auth::random_hex(16),
                                             stride * static_cast<std::size_t>(s.size));
        const std::string& locator = segment->locator();
        std::memcpy(name.data(), locator.data(), std::min(locator.size(), name.size() - 1));
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    broadcast(name.data(), name.data(), name.size(), DataType::Uint8, 0);
    const std::string shared_name(name.data(), strnlen(name.data(), name.size()));
    if (shared_name.empty()) {
      throw Error(Status::SystemError,
                  "alloc_shared: rank 0 could not create the shared segment" +
                      (failure.empty() ? std::string() : " (" + failure + ")"));
    }
    if (s.rank != 0 && bytes > 0) {
      try {
        segment = transport::Segment::open(shared_name, stride * static_cast<std::size_t>(s.size),
                                           deadline_after(s.config.timeout));
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    // The lowest rank that could not map it, or size when all could.
    std::int32_t first_failed = failure.empty() ? s.size : s.rank;
    all_reduce(&first_failed, &first_failed, 1, DataType::Int32, ReduceOp::Min);
    if (segment && s.rank == 0) segment->withdraw();
    if (first_failed < s.size) {
      throw Error(Status::SystemError,
                  "alloc_shared: rank " + std::to_string(first_failed) +
                      " could not map the shared segment" +
                      (failure.empty() ? std::string() : " (" + failure + ")"));
    }
    const std::uint64_t id = arena->windows().next_id();
    if (bytes == 0) return nullptr;
    return arena->windows().add(id, std::move(segment), stride, bytes, s.rank);
  } catch (const Error& e) {
    s.record_error(e.what());
    throw;
  }
}

void Communicator::free_shared(void* ptr) {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  if (!ptr) return;
  detail::CommState& s = *state_;
  if (transport::HostArena* arena = s.arena.get(); arena && arena->windows().remove(ptr, s.rank)) {
    return;
  }
  {
    std::lock_guard lock(s.shared_mutex);
    auto it = std::find(s.plain_shared.begin(), s.plain_shared.end(), ptr);
    if (it != s.plain_shared.end()) {
      s.plain_shared.erase(it);
      std::free(ptr);
      return;
    }
  }
  const std::string message =
      "free_shared: the pointer was not returned by alloc_shared on "
      "this communicator (or was freed already)";
  s.record_error(message);
  throw Error(Status::InvalidArgument, message);
}

}  // namespace chorus
