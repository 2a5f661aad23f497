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

}  // namespace

std::size_t InboxGeometry::inbox_bytes() const {
  constexpr std::size_t kPage = 4096;
  return (slot_offset(slots) + kPage - 1) / kPage * kPage;
}

std::size_t InboxGeometry::slot_offset(int slot) const {
  std::size_t slot_bytes = sizeof(RingControl) + round_up_64(ring_capacity);
  return round_up_64(sizeof(InboxHeader)) + static_cast<std::size_t>(slot) * slot_bytes;
}

std::shared_ptr<Segment> create_inboxes(const std::string& name, const std::vector<int>& owners,
                                        const InboxGeometry& geometry) {
  auto segment = Segment::create(name, geometry.inbox_bytes() * owners.size(), /*map_whole=*/false);
  for (std::size_t k = 0; k < owners.size(); ++k) {
    std::byte* base = segment->base() + k * geometry.inbox_bytes();
    InboxHeader* header = new (base) InboxHeader();
    header->ring_capacity = geometry.ring_capacity;
    header->owner_rank = owners[k];
    header->slots = geometry.slots;
    for (int slot = 0; slot < geometry.slots; ++slot) {
      new (base + geometry.slot_offset(slot)) RingControl();
    }
    std::atomic_ref<std::uint64_t>(header->magic).store(kInboxMagic, std::memory_order_release);
  }
  return segment;
}

Inbox Inbox::at(std::shared_ptr<Segment> segment, int slot, int owner_rank,
                const InboxGeometry& geometry) {
  const std::size_t offset = static_cast<std::size_t>(slot) * geometry.inbox_bytes();
  const bool fits = offset + geometry.inbox_bytes() <= segment->size();
  InboxHeader* header = reinterpret_cast<InboxHeader*>(segment->base() + offset);
  if (!fits ||
      std::atomic_ref<std::uint64_t>(header->magic).load(std::memory_order_acquire) !=
          kInboxMagic ||
      header->owner_rank != owner_rank || header->slots != geometry.slots ||
      header->ring_capacity != geometry.ring_capacity) {
    throw Error(Status::InternalError,
                "shared memory " + segment->name() + " does not hold the inbox of rank " +
                    std::to_string(owner_rank) + " with " + std::to_string(geometry.slots) +
                    " rings of " + std::to_string(geometry.ring_capacity) + " bytes");
  }
  return Inbox(std::move(segment), geometry, offset);
}

void Inbox::populate_for(int slot) const {
  segment_->populate(offset_, round_up_64(sizeof(InboxHeader)));
  segment_->populate(offset_ + geometry_.slot_offset(slot),
                     geometry_.slot_offset(slot + 1) - geometry_.slot_offset(slot));
}

Doorbell Inbox::doorbell() const {
  return Doorbell(&reinterpret_cast<InboxHeader*>(segment_->base() + offset_)->doorbell);
}

Ring Inbox::ring(int slot) const {
  std::byte* base = segment_->base() + offset_ + geometry_.slot_offset(slot);
  return Ring(reinterpret_cast<RingControl*>(base), base + sizeof(RingControl),
              geometry_.ring_capacity);
}

std::string inbox_name(const std::string& token, int owner_rank) {
  return "chorus-" + token + "-" + std::to_string(owner_rank) + "-inboxes";
}

}  // namespace chorus::transport::shm
