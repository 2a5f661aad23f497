// The inbox of one rank: one shared-memory segment holding its doorbell and
// one SPSC ring per same-host sender (slot = the sender's index among the
// host's ranks, so the owner's own slot is unused). The owner creates it and
// reads the rings; every same-host peer maps it, writes its own ring and
// rings the doorbell.
//
// Layout: [InboxHeader][slot 0: RingControl, capacity bytes]...[slot n-1: ...]
#pragma once

#include "transport/arena/segment.hpp"
#include "transport/doorbell.hpp"
#include "transport/shm/ring.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace chorus::transport::shm {

struct InboxGeometry {
  int slots = 0;                    ///< ranks on the host
  std::uint64_t ring_capacity = 0;  ///< power of two

  std::size_t segment_bytes() const;
  std::size_t slot_offset(int slot) const;
};

class Inbox {
 public:
  /// Creates the inbox of `owner_rank` under `name`.
  static Inbox create(const std::string& name, int owner_rank, const InboxGeometry& geometry);
  /// Maps the inbox another rank created, given its segment's locator (Segment::open);
  /// checks that it is the one expected.
  static Inbox open(const std::string& locator, int owner_rank, const InboxGeometry& geometry,
                    Deadline deadline);

  /// Fills the page tables of the header (the doorbell) and of sender `slot`'s ring: what a
  /// peer that maps this inbox touches.
  void populate_for(int slot) const;
  Doorbell doorbell() const;
  /// A fresh view of the ring of sender `slot` (each side keeps its own view).
  Ring ring(int slot) const;
  const std::shared_ptr<Segment>& segment() const { return segment_; }

 private:
  Inbox(std::shared_ptr<Segment> segment, InboxGeometry geometry)
      : segment_(std::move(segment)), geometry_(geometry) {}

  std::shared_ptr<Segment> segment_;
  InboxGeometry geometry_;
};

/// "chorus-<token>-<rank>", the segment's name in messages and /proc/<pid>/maps
/// (`token` is random per rank and communicator).
std::string inbox_name(const std::string& token, int owner_rank);

}  // namespace chorus::transport::shm
