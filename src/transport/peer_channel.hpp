// Everything this rank exchanges with one peer: the link, the posted sends
// (written in order, one frame each), the posted receives and the messages
// that arrived before their receive (buffered on the heap).
//
// Matching is FIFO per peer: a receive takes the next message from the peer,
// an already buffered one first. A message is streamed straight into the
// receive buffer when that receive is already posted; otherwise into a heap
// buffer, copied out when the receive is posted. Sizes and fingerprints are
// checked from the header before anything is allocated or copied.
#pragma once

#include "transport/frame.hpp"
#include "transport/link.hpp"
#include "transport/transport.hpp"

#include <chorus/error.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace chorus::transport {

/// Requests not yet complete, mapped to their peer. Channels erase what completes.
using PendingMap = std::unordered_map<RequestId, int>;

class PeerChannel {
 public:
  PeerChannel(int self, int peer, std::unique_ptr<Link> link);

  void post_send(RequestId id, const void* data, std::size_t bytes, const Fingerprint& fingerprint);
  void post_recv(RequestId id, void* data, std::size_t bytes, const Fingerprint& fingerprint);
  /// Queues a PROBE frame (no request; written after the sends already queued).
  void post_probe(const Fingerprint& fingerprint);

  /// Moves bytes in both directions without blocking. Returns true when
  /// anything moved. Throws the errors that break the whole transport
  /// (Mismatch, garbage on the wire, the peer's ABORT); a lost peer is only
  /// recorded (failure()), because it matters only to requests on this peer.
  bool progress(PendingMap& pending);
  bool progress_send(PendingMap& pending);

  /// The loss of this peer, once read_some/write_some reported it.
  const std::optional<Error>& failure() const { return failure_; }
  bool has_pending() const { return !sends_.empty() || !recvs_.empty(); }
  bool wants_write() const { return !sends_.empty(); }
  bool sent_abort() const { return peer_aborted_; }
  Link& link() { return *link_; }
  /// The fingerprint a pending request of this channel was posted with.
  std::optional<Fingerprint> fingerprint_of(RequestId id) const;
  /// The latest PROBE fingerprint the peer sent, until drop_probe().
  const std::optional<Fingerprint>& probe() const { return probe_; }
  void drop_probe() { probe_.reset(); }
  /// True once after each PROBE that arrived.
  bool take_probe_news() { return std::exchange(probe_news_, false); }
  /// "recv of 40 bytes from rank 1 for allreduce #3 (...)", or "" when not here.
  std::string describe_request(RequestId id) const;

  /// Best-effort ABORT: drops queued sends except one already on the wire,
  /// which push_abort() finishes before writing `frame`.
  void begin_abort(std::vector<std::byte> frame);
  /// Writes more of the abort; true when done or the peer is gone.
  bool push_abort();

 private:
  struct SendOp {
    RequestId id;
    FrameHeader header;
    const std::byte* payload;
    std::size_t bytes;
    std::vector<std::byte> inline_frame;  ///< header + payload of small messages, one write
    std::size_t done = 0;                 ///< bytes of the frame written so far
  };
  struct RecvOp {
    RequestId id;
    std::byte* data;
    std::size_t bytes;
    Fingerprint fingerprint;
  };
  struct Buffered {
    FrameHeader header;
    std::unique_ptr<std::byte[]> payload;
    bool complete = false;
  };
  enum class Target { None, Posted, Buffered, Abort, Probe };
  struct Incoming {
    FrameHeader header;
    std::size_t header_done = 0;
    Target target = Target::None;
    std::byte* destination = nullptr;
    std::size_t payload_done = 0;
  };

  bool advance(SendOp& op, bool* moved);
  bool read_step(PendingMap& pending, bool* moved);
  void route();
  void route_probe(const FrameHeader& header);
  void finish_frame(PendingMap& pending);
  void match_buffered(PendingMap& pending);
  void check_match(const RecvOp& op, const FrameHeader& header) const;
  [[noreturn]] void garbage(const std::string& detail) const;
  std::size_t read(void* data, std::size_t bytes);
  std::size_t write(const void* data, std::size_t bytes);

  int self_;
  int peer_;
  std::unique_ptr<Link> link_;
  std::deque<SendOp> sends_;
  std::deque<RecvOp> recvs_;
  bool front_recv_streaming_ = false;  ///< recvs_.front() is the destination of incoming_
  std::deque<Buffered> unexpected_;
  Incoming incoming_;
  std::vector<std::byte> abort_payload_;
  std::optional<Error> failure_;
  std::optional<Fingerprint> probe_;
  bool probe_news_ = false;
  bool peer_aborted_ = false;
  std::vector<std::byte> abort_frame_;
  std::size_t abort_done_ = 0;
};

}  // namespace chorus::transport
