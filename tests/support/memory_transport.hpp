// An in-process transport::Transport for tests: N ranks as N threads sharing
// one MemoryFabric.
//
// Semantics follow transport/transport.hpp: messages between an ordered pair
// arrive in posting order; sends complete at once (the bytes are copied into
// the receiver's inbox, which also buffers messages that arrive before their
// receive); a receive whose fingerprint (fingerprints_match) or byte count
// disagrees fails with Status::Mismatch naming both calls; a wait past its
// deadline fails with Status::Timeout naming the peers still awaited; test()
// and wait_until() never fail because of time, and interrupt() ends a
// wait_until() (or the next one) early. abort()
// on any rank breaks every rank of the fabric (RemoteError for the others), so
// a failing test thread releases the rest at once. After a throw a transport
// is broken and every later call throws the same error. With attach_arenas() each rank
// also has a host arena, so the algorithms that work in one run on threads too, and with
// attach_windows() a shared window in it, so do those that need their buffers in one.
#pragma once

#include "transport/arena/host_arena.hpp"
#include "transport/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace chorus::testing {

class MemoryEndpoint;

class MemoryFabric {
 public:
  explicit MemoryFabric(int size);
  /// host_of_rank.size() ranks whose topology() puts rank r on host
  /// host_of_rank[r] (hosts numbered 0, 1, ... by first appearance).
  explicit MemoryFabric(const std::vector<int>& host_of_rank);
  ~MemoryFabric();
  MemoryFabric(const MemoryFabric&) = delete;
  MemoryFabric& operator=(const MemoryFabric&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }
  /// The transport of `rank`, owned by the fabric. Use it from one thread.
  transport::Transport& transport(int rank);
  /// Messages `rank` has posted so far (to check that a call sent nothing).
  std::uint64_t messages_sent(int rank) const;
  /// Gives every rank a host arena (one shared-memory segment, as a communicator of one host
  /// has; collective over the ranks, so it runs them on threads itself), whose waits ask the
  /// rank's endpoint about aborts. Call before run_ranks.
  void attach_arenas();
  /// Rank `rank`'s host arena, or nullptr before attach_arenas.
  transport::HostArena* arena(int rank) const;
  /// Registers one shared window of `bytes_per_rank` bytes per rank in every rank's arena
  /// (one segment, mapped once per rank, with rank r's part at r x a page-rounded stride, as
  /// Communicator::alloc_shared makes it), so that contexts on the arenas provide
  /// kNeedsSharedWindows. Call once, after attach_arenas, before run_ranks.
  void attach_windows(std::size_t bytes_per_rank);
  /// Rank `rank`'s part of that window, in its own mapping (empty before attach_windows).
  std::span<std::byte> window(int rank) const;

 private:
  friend class MemoryEndpoint;
  MemoryEndpoint& endpoint(int rank) const { return *endpoints_[static_cast<std::size_t>(rank)]; }

  std::vector<std::unique_ptr<MemoryEndpoint>> endpoints_;
  std::vector<std::unique_ptr<transport::HostArena>> arenas_;  ///< after attach_arenas
  std::vector<std::span<std::byte>> windows_;                  ///< after attach_windows
};

/// Runs `body(transport, rank)` on one thread per rank of `fabric` and joins
/// them. Returns one message per rank that threw (empty when none did); a
/// throwing rank aborts the fabric so that the others stop waiting.
std::vector<std::string> run_ranks(MemoryFabric& fabric,
                                   const std::function<void(transport::Transport&, int)>& body);
/// The same on a fresh fabric of `size` ranks.
std::vector<std::string> run_ranks(int size,
                                   const std::function<void(transport::Transport&, int)>& body);

}  // namespace chorus::testing
