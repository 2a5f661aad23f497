// Everything this rank exchanges with one peer: the link, the posted sends
// (written in order, one frame each), the posted receives and the messages
// that arrived before their receive (buffered on the heap).
//
// Matching (see transport.hpp): messages live in two spaces. A collective message (any
// fingerprint but Send) goes to the first posted collective receive, so collectives stay
// strictly FIFO per peer. A point-to-point message (a Send fingerprint) goes to the earliest
// posted point-to-point receive whose tag (Fingerprint::root) equals its own: a receive naming
// this peer, or an any-source receive (AnySourceRecvs, shared by every channel of the
// transport), whichever was posted first (lower RequestId). A message is matched when its
// header arrives; it is then streamed straight into that receive's buffer. Otherwise it is
// buffered (stamped with its arrival), and handed over, oldest first, once a matching receive
// is posted. Invariant after every call: no complete buffered message matches a posted
// receive. Sizes and fingerprints are checked from the header before anything is allocated
// or copied.
//
// Holding: buffering costs one more copy of the message, which on a link that is itself a
// copy (TCP) can double the work. So a large collective message that finds no receive is
// first held: its header is taken, its payload left in the link (the peer's flow control
// holds the rest), and every progress call looks again for its receive, streaming straight
// into it once posted (collective algorithms post the next receive moments later). It is
// buffered after all when it was held for hold_time() (longer for larger messages), or at
// once when this channel's own send to the peer is stuck (both sides sending first must not
// wait on each other), so a rank that never posts the receive costs its peer at most that.
// Point-to-point and small messages are never held.
#pragma once

#include "transport/call_history.hpp"
#include "transport/frame.hpp"
#include "transport/link.hpp"
#include "transport/transport.hpp"

#include <chorus/error.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace chorus::transport {

/// Collective messages from this size on are held rather than buffered (see Holding above).
inline constexpr std::uint64_t kHoldBytes = 64 * 1024;
/// Longest a message is held before it is buffered after all: kHoldTime, or for large
/// messages kHoldNanosPerByte per byte (a rank busy with the step before, say folding in an
/// equally large message, posts the receive later the larger the messages are), at most
/// kMaxHoldTime (frames behind a held message, an ABORT or a PROBE, wait as long).
inline constexpr std::chrono::milliseconds kHoldTime{20};
inline constexpr double kHoldNanosPerByte = 2.0;
inline constexpr std::chrono::milliseconds kMaxHoldTime{250};
std::chrono::nanoseconds hold_time(std::uint64_t payload_bytes);

/// Requests not yet complete, mapped to their peer. Channels erase what completes.
using PendingMap = std::unordered_map<RequestId, int>;

/// A posted receive. `source` is null for a receive naming its peer; for an any-source
/// receive it receives the sender's rank when the message is complete.
struct PostedRecv {
  RequestId id;
  std::byte* data;
  std::size_t bytes;
  Fingerprint fingerprint;
  int* source = nullptr;
};

/// The any-source receives of one transport, shared by its channels (one thread at a time).
struct AnySourceRecvs {
  std::deque<PostedRecv> recvs;           ///< not yet matched, posting order
  std::unordered_set<RequestId> pending;  ///< not yet complete (matched or not)
  std::uint64_t arrivals = 0;             ///< clock stamping buffered messages
};

class PeerChannel {
 public:
  /// `any` (may be null: no any-source receives) and `history` (may be null: mismatches
  /// name only the calls at hand) must outlive the channel.
  PeerChannel(int self, int peer, std::unique_ptr<Link> link, AnySourceRecvs* any = nullptr,
              const CallHistory* history = nullptr);

  /// Turns holding (see above) on; off, every early message is buffered at once, so each
  /// progress call reads something while the link has bytes (the ProgressEngine turns it on).
  void set_holding(bool on) { holding_ = on; }

  void post_send(RequestId id, const void* data, std::size_t bytes, const Fingerprint& fingerprint);
  void post_recv(RequestId id, void* data, std::size_t bytes, const Fingerprint& fingerprint);
  /// Hands complete buffered messages to posted receives (named or any-source), oldest first.
  void match_buffered(PendingMap& pending);
  /// Arrival stamp of the oldest complete buffered point-to-point message with the tag of
  /// `fingerprint`, if any: an any-source receive takes the earliest over all channels.
  std::optional<std::uint64_t> buffered_stamp(const Fingerprint& fingerprint) const;
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
  bool has_pending() const { return !sends_.empty() || !recvs_.empty() || incoming_.recv; }
  bool wants_write() const { return !sends_.empty(); }
  /// When the message held now (see Holding above) is buffered unless its receive comes
  /// first; nullopt when none is held. While one is held the link has nothing to read.
  std::optional<Clock::time_point> hold_expiry() const;
  /// Buffers the held message on the next progress call (the peer hung up).
  void end_hold() { hold_ended_ = incoming_.target == Target::Held; }
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
  struct Buffered {
    FrameHeader header;
    std::unique_ptr<std::byte[]> payload;
    bool complete = false;
    std::uint64_t stamp = 0;    ///< arrival order across channels
    std::size_t capacity = 0;   ///< bytes of `payload` in use (grows as the message arrives)
    std::size_t allocated = 0;  ///< bytes `payload` holds (>= capacity when it was the spare)
  };
  /// Where the receive chosen for a message is queued.
  struct Choice {
    std::deque<PostedRecv>* queue = nullptr;
    std::size_t index = 0;
  };
  enum class Target { None, Held, Posted, Buffered, Abort, Probe };
  struct Incoming {
    FrameHeader header;
    std::size_t header_done = 0;
    Target target = Target::None;
    std::byte* destination = nullptr;
    std::size_t payload_done = 0;
    std::optional<PostedRecv> recv;  ///< the receive the payload streams into (Target::Posted)
    Clock::time_point held_until{};  ///< when its hold ends: arrival + hold_time (Target::Held)
  };

  bool advance(SendOp& op, bool* moved);
  bool read_step(PendingMap& pending, bool* moved);
  void route();
  /// A held message: its receive if posted now, else buffering once the hold ends.
  /// Returns false while it stays held.
  bool resume_held();
  void start_buffering();
  void route_probe(const FrameHeader& header);
  std::size_t grow_buffered();
  void recycle(std::unique_ptr<std::byte[]> buffer, std::size_t allocated);
  void adopt_incoming();
  void finish_frame(PendingMap& pending);
  /// match_buffered() for the message that just completed (the newest buffered one).
  void match_newest(PendingMap& pending);
  /// Gives a complete buffered message to its receive, if one is posted; true when it did.
  bool hand_over(std::deque<Buffered>::iterator message, PendingMap& pending);
  /// The posted receive a message with `header` goes to (queue null: none yet).
  Choice choose(const FrameHeader& header);
  PostedRecv take(Choice choice);
  void complete(const PostedRecv& op, PendingMap& pending);
  void check_match(const PostedRecv& op, const FrameHeader& header) const;
  [[noreturn]] void garbage(const std::string& detail) const;
  std::size_t read(void* data, std::size_t bytes);
  std::size_t write(const void* data, std::size_t bytes);

  int self_;
  int peer_;
  std::unique_ptr<Link> link_;
  std::deque<SendOp> sends_;
  AnySourceRecvs* any_;
  const CallHistory* history_;    ///< this rank's recent calls, for mismatch sentences
  std::deque<PostedRecv> recvs_;  ///< receives naming this peer, not yet matched, posting order
  std::deque<Buffered> unexpected_;
  std::unique_ptr<std::byte[]> spare_;  ///< a finished early message's buffer, for the next one
  std::size_t spare_bytes_ = 0;
  std::uint64_t arrivals_ = 0;  ///< stamps buffered messages when there is no shared clock
  bool recv_posted_ = false;    ///< a receive was posted since match_buffered() last ran
  bool send_stuck_ = false;     ///< the last write of a send took nothing (link full)
  bool holding_ = false;        ///< set_holding()
  bool hold_ended_ = false;     ///< end_hold() was called
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
