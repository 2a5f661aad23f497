// A shared-memory segment that never has a name in /dev/shm: an anonymous memory file
// (memfd_create) mapped by its creator, which hands its descriptor to other processes of the
// same user on this host (fd_handoff.hpp) until it withdraws it. The memory goes back to the
// system when the last process that maps it unmaps it or dies, so no way a job ends (a crash,
// SIGKILL at any moment of start-up) can leave shared memory behind.
#pragma once

#include "transport/arena/fd_handoff.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace chorus::transport {

class Segment {
 public:
  /// Creates a segment of `bytes` zero bytes, every page allocated (a full memory is an
  /// error here, not a SIGBUS later). `name` is for messages and /proc/<pid>/maps only.
  /// Others can open it (locator()) until withdraw().
  /// `map_whole`: the creator's page tables are filled in for the whole segment; false: the
  /// creator, like an opener, populate()s only what it uses (a segment that many ranks
  /// share: one process filling in gigabytes of page tables would hold up every rank).
  static std::shared_ptr<Segment> create(const std::string& name, std::size_t bytes,
                                         bool map_whole = true);
  /// Maps the segment another process created, given its locator(), waiting for its
  /// creator until `deadline`; the segment must be exactly `bytes` long. The creator maps
  /// with every page table filled in; an opener only with those it populate()s (the rest
  /// fault in on first touch: n ranks that each map n peers' segments whole would fill n²
  /// segments' worth of page tables, most of them never touched).
  static std::shared_ptr<Segment> open(const std::string& locator, std::size_t bytes,
                                       Deadline deadline);

  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  /// What another process passes to open(): the name of the creator's descriptor server.
  /// Empty once withdrawn, and in a segment that was opened (only the creator hands it out).
  const std::string& locator() const { return locator_; }
  /// Stops handing the segment out and closes the creator's descriptor: nobody can open it
  /// any more; the mappings stay valid. Idempotent; call it once every user has mapped it.
  void withdraw() noexcept;

  /// Fills the page tables of bytes [offset, offset + bytes) (clamped to the segment), so
  /// that the first touches there take no page faults. Best effort (MADV_POPULATE_WRITE:
  /// Linux 5.14 and later; earlier kernels fault on first touch).
  void populate(std::size_t offset, std::size_t bytes) noexcept;

  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, std::byte* base, std::size_t size, int fd)
      : name_(std::move(name)), base_(base), size_(size), fd_(fd) {}

  std::string name_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;                       ///< the creator's descriptor until withdraw()
  std::unique_ptr<FdServer> server_;  ///< hands fd_ out until withdraw()
  std::string locator_;               ///< server_'s name; empty without it
};

/// What a creator publishes (through the store) so that others can map its segment: a
/// size field the opener needs (e.g. a ring capacity) and the segment's locator.
struct SegmentNotice {
  std::string field;
  std::string locator;

  /// "<field> <locator>".
  std::string text() const { return field + " " + locator; }
  /// Splits text() at its first space (an empty locator when there is none).
  static SegmentNotice parse(const std::string& text);
};

}  // namespace chorus::transport
