// The inbox of one rank: its doorbell and one SPSC ring per same-host sender
// (slot = the sender's index among the host's ranks, so the owner's own slot is
// unused). The owner reads the rings; every same-host peer writes its own ring
// and rings the doorbell. The inboxes of a host's ranks lie in one shared-memory
// segment (inbox k at k x inbox_bytes()), which the host's first rank creates and
// every other maps: one mapping per rank, not one per pair of ranks.
//
// Inbox layout: [InboxHeader][slot 0: RingControl, capacity bytes]...[slot n-1: ...]
#pragma once

#include "transport/arena/segment.hpp"
#include "transport/doorbell.hpp"
#include "transport/shm/ring.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::transport::shm {

struct InboxGeometry {
  int slots = 0;                    ///< ranks on the host
  std::uint64_t ring_capacity = 0;  ///< power of two

  /// One inbox, rounded up to whole pages.
  std::size_t inbox_bytes() const;
  /// Offset of sender `slot`'s ring control within an inbox.
  std::size_t slot_offset(int slot) const;
};

/// Creates the segment of the inboxes of `owners` (ranks, in slot order) under `name`.
std::shared_ptr<Segment> create_inboxes(const std::string& name, const std::vector<int>& owners,
                                        const InboxGeometry& geometry);

class Inbox {
 public:
  /// The inbox of slot `slot` in a segment made by create_inboxes (or mapped from one);
  /// checks that it is the inbox of `owner_rank` with this geometry.
  static Inbox at(std::shared_ptr<Segment> segment, int slot, int owner_rank,
                  const InboxGeometry& geometry);

  /// Fills the page tables of the header (the doorbell) and of sender `slot`'s ring: what a
  /// peer that maps this inbox touches.
  void populate_for(int slot) const;
  Doorbell doorbell() const;
  /// A fresh view of the ring of sender `slot` (each side keeps its own view).
  Ring ring(int slot) const;
  const std::shared_ptr<Segment>& segment() const { return segment_; }

 private:
  Inbox(std::shared_ptr<Segment> segment, InboxGeometry geometry, std::size_t offset)
      : segment_(std::move(segment)), geometry_(geometry), offset_(offset) {}

  std::shared_ptr<Segment> segment_;
  InboxGeometry geometry_;
  std::size_t offset_ = 0;  ///< of this inbox within the segment
};

/// "chorus-<token>-<rank>-inboxes", the segment's name in messages and /proc/<pid>/maps
/// (`token` is random per rank and communicator; `owner_rank` the host's first rank).
std::string inbox_name(const std::string& token, int owner_rank);

}  // namespace chorus::transport::shm
