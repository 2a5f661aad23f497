// Shared-memory inbox layout.
#include "transport/shm/inbox.hpp"

#include <chorus/error.hpp>

#include <atomic>

namespace chorus::transport::shm {
namespace {

constexpr std::uint64_t kInboxMagic = 0x31584f424e494843;  // "CHINBOX1"

struct InboxHeader {
  std::uint64_t magic = 0;
  std::uint64_t ring_capacity = 0;
  std::int32_t owner_rank = -1;
  std::int32_t slots = 0;
  DoorbellWord doorbell;
};

constexpr std::size_t round_up_64(std::size_t n) { return (n + 63) / 64 * 64; }

InboxHeader* header_of(const Segment& segment) {
  return reinterpret_cast<InboxHeader*>(segment.base());
}

}  // namespace

std::size_t InboxGeometry::segment_bytes() const { return slot_offset(slots); }

std::size_t InboxGeometry::slot_offset(int slot) const {
  std::size_t slot_bytes = sizeof(RingControl) + round_up_64(ring_capacity);
  return round_up_64(sizeof(InboxHeader)) + static_cast<std::size_t>(slot) * slot_bytes;
}

Inbox Inbox::create(const std::string& name, int owner_rank, const InboxGeometry& geometry) {
  auto segment = Segment::create(name, geometry.segment_bytes());
  InboxHeader* header = new (segment->base()) InboxHeader();
  header->ring_capacity = geometry.ring_capacity;
  header->owner_rank = owner_rank;
  header->slots = geometry.slots;
  for (int slot = 0; slot < geometry.slots; ++slot) {
    new (segment->base() + geometry.slot_offset(slot)) RingControl();
  }
  std::atomic_ref<std::uint64_t>(header->magic).store(kInboxMagic, std::memory_order_release);
  return Inbox(std::move(segment), geometry);
}

Inbox Inbox::open(const std::string& locator, int owner_rank, const InboxGeometry& geometry,
                  Deadline deadline) {
  auto segment = Segment::open(locator, geometry.segment_bytes(), deadline);
  InboxHeader* header = header_of(*segment);
  std::uint64_t magic =
      std::atomic_ref<std::uint64_t>(header->magic).load(std::memory_order_acquire);
  if (magic != kInboxMagic || header->owner_rank != owner_rank || header->slots != geometry.slots ||
      header->ring_capacity != geometry.ring_capacity) {
    throw Error(Status::InternalError, "shared memory " + locator + " is not the inbox of rank " +
                                           std::to_string(owner_rank) + " with " +
                                           std::to_string(geometry.slots) + " rings of " +
                                           std::to_string(geometry.ring_capacity) + " bytes");
  }
  return Inbox(std::move(segment), geometry);
}

void Inbox::populate_for(int slot) const {
  segment_->populate(0, round_up_64(sizeof(InboxHeader)));
  segment_->populate(geometry_.slot_offset(slot),
                     geometry_.slot_offset(slot + 1) - geometry_.slot_offset(slot));
}

Doorbell Inbox::doorbell() const { return Doorbell(&header_of(*segment_)->doorbell); }

Ring Inbox::ring(int slot) const {
  std::byte* base = segment_->base() + geometry_.slot_offset(slot);
  return Ring(reinterpret_cast<RingControl*>(base), base + sizeof(RingControl),
              geometry_.ring_capacity);
}

std::string inbox_name(const std::string& token, int owner_rank) {
  return "chorus-" + token + "-" + std::to_string(owner_rank);
}

}  // namespace chorus::transport::shm
