// Single-copy transfers between the ranks of one host: cross-memory reads
// (transport/arena/cross_memory.hpp) let a rank read a peer's user buffer directly,
// so a byte is copied once instead of twice (into the arena, out of it). The cma
// algorithms (<collective>/cma.cpp for all-reduce, broadcast, all-gather, gather,
// scatter and all-to-all) use the host arena only to publish addresses and to
// order their phases with flags.
//
// A CmaCall opens one round g of the arena: every rank publishes a card (its
// pid, its send and receive addresses, the address of a probe word) and posts
// 2g; once every card is in, each rank keeps a copy of all of them.
//
// Availability: the kernel may forbid the reads (seccomp, YAMA ptrace_scope,
// other uids). Every rank also publishes what it learnt about this arena
// before: the hash of the pids it verified and whether the reads worked. When
// every card reports the same verdict for the pids now published, that verdict
// holds; otherwise every rank reads each peer's probe word, writes its own
// verdict and posts 2g + 1, and all adopt "every rank read every peer". Every
// rank decides from the same published cards, so all agree. When the reads
// are unusable the algorithm hands the call to its shm_direct counterpart and returns
// that row (RunFunction), which the Outcome names (selection cannot see the arena's
// verdict; it stays a pure function of the call and the context).
//
// Lifetime of the addresses: a card names buffers of round g's call. The
// algorithms keep every rank in the call until no peer will read its buffers
// again (a last flag that every rank waits for).
#pragma once

#include "algorithms/algorithm.hpp"
#include "transport/arena/cross_memory.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace chorus::transport {
class HostArena;
}

namespace chorus::algorithms {

class CmaCall {
 public:
  /// Begins the call in the context's host arena and exchanges the cards (see above).
  CmaCall(const Call& args, const Context& ctx);
  CmaCall(const CmaCall&) = delete;
  CmaCall& operator=(const CmaCall&) = delete;

  /// Whether every rank can read every other rank's memory (the same on every rank).
  bool usable() const { return usable_; }
  transport::HostArena& arena() { return arena_; }
  /// The round of the cards; the call's next round is card_round() + 1.
  std::uint64_t card_round() const { return round_; }

  /// Copies `bytes` bytes at byte `offset` of rank `peer`'s send (recv) buffer to `dst`.
  /// Threads as ranks (one address space) copy directly. A failed read aborts the transport
  /// and throws RemoteError (the peer is gone) or SystemError, naming the peer.
  void read_send(int peer, std::size_t offset, void* dst, std::size_t bytes);
  void read_recv(int peer, std::size_t offset, void* dst, std::size_t bytes);

  struct Card {
    std::uint64_t pid;
    std::uint64_t send;
    std::uint64_t recv;
    std::uint64_t probe_address;
    std::uint64_t probe_value;
    std::uint64_t known_pids;  ///< hash of the pids of an earlier verdict (0: none)
    std::uint64_t known_verdict;
    std::uint64_t unused;
  };

 private:
  void publish_card();
  bool agree();
  bool probe_peers();
  void read(int peer, std::uint64_t base, std::size_t offset, void* dst, std::size_t bytes);
  [[noreturn]] void fail_read(int peer, int error, std::size_t bytes);

  const Context& ctx_;
  const Call& args_;
  transport::HostArena& arena_;
  std::uint64_t round_ = 0;
  std::vector<Card> cards_;
  transport::CrossMemory memory_;
  volatile std::uint64_t probe_word_ = 0;  ///< read by peers while they probe
  bool usable_ = false;
};

/// A per-thread buffer of at least `bytes` bytes, reused across calls (no page
/// faults per call), aligned for every dtype.
std::byte* cma_scratch(std::size_t bytes);

/// Fills this rank's receive buffer with every rank's block of args.count elements: its own
/// copied from its send buffer into block rank (nothing in place), each peer p's send buffer
/// read into block p. All-gather (every rank) and gather (the root).
void read_every_block(CmaCall& call, const Call& args);

}  // namespace chorus::algorithms
