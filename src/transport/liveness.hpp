// What a rank that waits outside the transport's own wait() (a collective in the host
// arena, transport/arena/host_arena.hpp) asks of the transport: aborts, dead peers and stall
// probes, so that such a wait fails as a transport wait would. The progress engine
// implements it; the arena holds a pointer to it, so the transport outlives the arena.
#pragma once

#include "core/collective.hpp"
#include "transport/wait_policy.hpp"

#include <chorus/error.hpp>

#include <optional>
#include <vector>

namespace chorus::transport {

class Liveness {
 public:
  virtual ~Liveness() = default;
  /// One liveness pass: throws (and breaks the transport) when it is aborted, a
  /// peer aborted, or a probe shows a peer in another call `call`. A peer that is gone
  /// (closed its connection, or died) is only noted: see arena_lost.
  /// `send_probe`: tell every peer which call this rank waits in.
  virtual void arena_check(const Fingerprint& call, bool send_probe) = 0;
  /// The loss of rank `r` (it closed its connection: it destroyed its communicator, or
  /// died), or nothing. The arena fails a wait for r with it only when r's flag does not
  /// satisfy the wait: a peer that finished its part of a call and left is no failure of
  /// the ranks that still read what it wrote.
  virtual std::optional<Error> arena_lost(int r) = 0;
  /// Breaks the transport with `error` and throws it.
  [[noreturn]] virtual void arena_fail(const Error& error) = 0;
  /// Throws what broke the transport, if anything has (no progress, no liveness pass).
  virtual void arena_throw_if_broken() = 0;
  /// Where the transport last saw each rank (messages, probes), for the timeout sentence;
  /// empty when it knows nothing.
  virtual std::vector<std::optional<Fingerprint>> arena_sightings() { return {}; }
  /// How a waiter on this host polls, yields and sleeps (the transport's own policy).
  virtual WaitPolicy wait_policy() const { return {}; }
};

}  // namespace chorus::transport
