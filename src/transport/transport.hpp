// The one interface algorithms move bytes through.
//
// A Transport is one rank's set of connections to every other rank of a
// communicator. Messages between a pair of ranks arrive in the order they were
// posted (per direction). Every message carries the Fingerprint of the call that
// sent it; a receive whose fingerprint or byte count disagrees fails with
// Status::Mismatch and a sentence naming both calls.
//
// Matching: collective messages (every fingerprint but Send) go to the collective
// receives posted for that peer strictly in order. Point-to-point messages (Send
// fingerprints) form a separate space keyed by tag (Fingerprint::root): one goes to
// the earliest posted point-to-point receive with its tag, either naming its sender
// (post_recv) or any-source (post_recv_any); messages with other tags wait for their
// own receive. A receive whose fingerprint has kAnySeq in `reserved` accepts any
// sequence number. A point-to-point message and a collective
// receive never match each other.
//
// Progress: wait() drives every connection, not only the requests it waits
// for, and buffers messages that arrive before their receive is posted, so two
// ranks that both send first never deadlock.
//
// Stalls: ranks that called different collectives may wait on each other with
// no message flowing. A wait that sees no request complete for a short while
// tells every peer which collective it is in (a PROBE frame); a rank in the
// collective with the same sequence number but another fingerprint fails with
// Mismatch naming both calls. Point-to-point calls are never probed.
//
// Threads: one thread at a time posts and waits or tests (the communicator
// serialises its operations; test/wait_until may come from another thread than
// the posts). abort() and interrupt() may be called from any thread at any time.
#pragma once

#include "core/collective.hpp"
#include "core/deadline.hpp"
#include "core/topology.hpp"

#include <chorus/error.hpp>
#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace chorus::transport {

using RequestId = std::uint64_t;

/// Fingerprint::reserved flag of a point-to-point receive: match a message of any sequence
/// number (the communicator cannot predict it once any-source receives take messages).
inline constexpr std::uint8_t kAnySeq = 1;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const Topology& topology() const = 0;

  /// Starts sending `bytes` bytes (0 allowed) to `peer` (!= rank()). `data`
  /// must stay valid and unchanged until a wait() covering the id returns.
  virtual RequestId post_send(int peer, const void* data, std::size_t bytes,
                              const Fingerprint& fingerprint) = 0;
  /// Starts receiving the next message from `peer` into `data`, which must
  /// hold exactly `bytes` bytes (a message of another size is a Mismatch).
  virtual RequestId post_recv(int peer, void* data, std::size_t bytes,
                              const Fingerprint& fingerprint) = 0;
  /// Starts receiving the next point-to-point message (`fingerprint` is a Recv) with
  /// the tag `fingerprint.root` from whichever peer: among messages already complete
  /// here, the earliest to arrive; else the first to arrive. On completion `*source`
  /// (valid until then) holds the sender's rank. Losing any peer while it is pending
  /// fails it (RemoteError). Transports without this ability throw InvalidUsage.
  virtual RequestId post_recv_any(void* data, std::size_t bytes, const Fingerprint& fingerprint,
                                  int* source) {
    (void)data, (void)bytes, (void)fingerprint, (void)source;
    throw Error(Status::InvalidUsage, "this transport cannot receive from any source");
  }

  /// Returns when every listed request has completed. Throws chorus::Error:
  /// Timeout (naming the peers still awaited), RemoteError (a peer died or
  /// aborted, naming it), Mismatch, or the status given to abort(). After a
  /// throw the transport is broken: every later call throws the same error.
  virtual void wait(std::span<const RequestId> ids, Deadline deadline) = 0;

  /// One progress pass over every link; true when every listed request has completed. Never
  /// sleeps and never fails because of time; throws like wait() when the transport is broken or a
  /// listed request's peer is lost or mismatched.
  virtual bool test(std::span<const RequestId> ids) = 0;
  /// Like wait(), but returns false when `until` passes first, leaving the transport intact
  /// (the requests stay pending); the caller owns the real deadline. Also returns (false unless
  /// every request is done) promptly after interrupt().
  virtual bool wait_until(std::span<const RequestId> ids, Deadline until) = 0;
  /// Wakes a thread blocked in wait()/wait_until() without failing it: wait() re-checks and goes
  /// on waiting, wait_until() returns. An interrupt with nobody waiting ends the next
  /// wait_until() after one pass. Thread-safe. Used by the communicator when new work is queued.
  virtual void interrupt() noexcept = 0;

  /// Fails every pending and later operation with (status, reason), tells the
  /// peers best-effort so that their pending calls fail fast too. Thread-safe,
  /// idempotent (the first reason wins).
  virtual void abort(Status status, const std::string& reason) = 0;
};

}  // namespace chorus::transport
