// Per-peer framing, matching and buffering; see peer_channel.hpp.
#include "transport/peer_channel.hpp"

#include "transport/abort_frame.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace chorus::transport {
namespace {

/// Messages up to this size are copied behind their header and written in one call.
constexpr std::size_t kInlineBytes = 16 * 1024;
/// Frames or chunks read from one peer per progress call, so one busy peer cannot starve the rest.
constexpr int kReadStepsPerCall = 32;

std::string hex(std::uint32_t value) {
  static const char* digits = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) text += digits[(value >> shift) & 0xf];
  return text;
}

}  // namespace

// Back-to-back binomial reduces of 16-64 MiB, 4 ranks on 2 cores, CHORUS_TRANSPORT=tcp: a leaf
// sends its next message while the root still folds in the last one, with the machine busy
// for well over 20 ms; the root then buffered it (a 64 MiB allocation grown from 1 MiB, fresh
// pages, one more copy: ~15% of the root's samples under perf). Held 2 ns per byte instead
// (64 MiB: 134 ms; 4 MiB and less: 20 ms as before), medians of 7 interleaved chorus-perf
// runs: 16 MiB 76.9 -> 60.6 ms, 64 MiB 366.5 -> 244.4 ms; other collectives unchanged.
std::chrono::nanoseconds hold_time(std::uint64_t payload_bytes) {
  const double scaled = static_cast<double>(payload_bytes) * kHoldNanosPerByte;
  const double most = std::chrono::duration<double, std::nano>(kMaxHoldTime).count();
  return std::max<std::chrono::nanoseconds>(
      kHoldTime, std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(scaled, most))));
}

PeerChannel::PeerChannel(int self, int peer, std::unique_ptr<Link> link, AnySourceRecvs* any,
                         const CallHistory* history)
    : self_(self), peer_(peer), link_(std::move(link)), any_(any), history_(history) {}

void PeerChannel::post_send(RequestId id, const void* data, std::size_t bytes,
                            const Fingerprint& fingerprint) {
  SendOp op{id, FrameHeader{}, static_cast<const std::byte*>(data), bytes, {}, 0};
  op.header.payload_bytes = bytes;
  op.header.fingerprint = fingerprint;
  if (bytes <= kInlineBytes) {
    op.inline_frame.resize(sizeof(FrameHeader) + bytes);
    std::memcpy(op.inline_frame.data(), &op.header, sizeof(FrameHeader));
    if (bytes > 0) std::memcpy(op.inline_frame.data() + sizeof(FrameHeader), data, bytes);
  }
  sends_.push_back(std::move(op));
}

void PeerChannel::post_recv(RequestId id, void* data, std::size_t bytes,
                            const Fingerprint& fingerprint) {
  recvs_.push_back(PostedRecv{id, static_cast<std::byte*>(data), bytes, fingerprint, nullptr});
  recv_posted_ = true;
}

void PeerChannel::post_probe(const Fingerprint& fingerprint) {
  SendOp op{0, FrameHeader{}, nullptr, 0, {}, 0};
  op.header.kind = static_cast<std::uint8_t>(FrameKind::Probe);
  op.header.fingerprint = fingerprint;
  op.inline_frame.resize(sizeof(FrameHeader));
  std::memcpy(op.inline_frame.data(), &op.header, sizeof(FrameHeader));
  sends_.push_back(std::move(op));
}

bool PeerChannel::progress(PendingMap& pending) {
  bool moved = progress_send(pending);
  if (recv_posted_) match_buffered(pending);
  for (int step = 0; step < kReadStepsPerCall && !failure_; ++step) {
    if (!read_step(pending, &moved)) break;
  }
  return moved;
}

bool PeerChannel::progress_send(PendingMap& pending) {
  bool moved = false;
  while (!sends_.empty() && !failure_ && advance(sends_.front(), &moved)) {
    pending.erase(sends_.front().id);
    sends_.pop_front();
    moved = true;
  }
  return moved;
}

/// Writes more of `op`: the inline frame, or the header then the payload.
/// Returns true when the whole frame is written.
bool PeerChannel::advance(SendOp& op, bool* moved) {
  const std::size_t total = sizeof(FrameHeader) + op.bytes;
  while (op.done < total) {
    const std::byte* from;
    std::size_t left;
    if (!op.inline_frame.empty()) {
      from = op.inline_frame.data() + op.done;
      left = total - op.done;
    } else if (op.done < sizeof(FrameHeader)) {
      from = reinterpret_cast<const std::byte*>(&op.header) + op.done;
      left = sizeof(FrameHeader) - op.done;
    } else {
      from = op.payload + (op.done - sizeof(FrameHeader));
      left = total - op.done;
    }
    std::size_t n = write(from, left);
    send_stuck_ = n == 0;
    if (n == 0) return false;
    op.done += n;
    *moved = true;
  }
  return true;
}

/// One step of the incoming state machine: more header, routing, more payload,
/// completion. Returns false when the link has nothing more for now.
bool PeerChannel::read_step(PendingMap& pending, bool* moved) {
  Incoming& in = incoming_;
  if (in.header_done < sizeof(FrameHeader)) {
    auto* header = reinterpret_cast<std::byte*>(&in.header);
    std::size_t n = read(header + in.header_done, sizeof(FrameHeader) - in.header_done);
    if (n == 0) return false;
    *moved = true;
    in.header_done += n;
    if (in.header_done < sizeof(FrameHeader)) return true;
    route();
  }
  if (in.target == Target::Held && !resume_held()) return false;
  std::size_t bytes = in.header.payload_bytes;
  if (in.payload_done < bytes) {
    std::size_t room = bytes - in.payload_done;
    if (in.target == Target::Buffered) room = grow_buffered();
    std::size_t n = read(in.destination + in.payload_done, room);
    if (n == 0) return false;
    *moved = true;
    in.payload_done += n;
    if (in.payload_done < bytes) return true;
  }
  finish_frame(pending);
  return true;
}

/// A header just arrived: validate it and choose where its payload goes.
void PeerChannel::route() {
  Incoming& in = incoming_;
  const FrameHeader& h = in.header;
  if (h.magic != kFrameMagic) garbage("bad frame magic " + hex(h.magic));
  if (h.kind == static_cast<std::uint8_t>(FrameKind::Abort)) {
    if (h.payload_bytes > kMaxAbortPayload) {
      garbage("an abort message of " + std::to_string(h.payload_bytes) + " bytes");
    }
    abort_payload_.resize(h.payload_bytes);
    in.target = Target::Abort;
    in.destination = abort_payload_.data();
    return;
  }
  if (h.kind == static_cast<std::uint8_t>(FrameKind::Probe)) return route_probe(h);
  if (h.kind != static_cast<std::uint8_t>(FrameKind::Data)) {
    garbage("unknown frame kind " + std::to_string(h.kind));
  }
  if (h.payload_bytes > kMaxDataPayload) {
    garbage("a message of " + std::to_string(h.payload_bytes) + " bytes (the limit is 64 GiB)");
  }
  if (Choice choice = choose(h); choice.queue) {
    check_match((*choice.queue)[choice.index], h);
    in.recv = take(choice);
    in.target = Target::Posted;
    in.destination = in.recv->data;
    return;
  }
  if (holding_ && h.payload_bytes >= kHoldBytes && !is_point_to_point(h.fingerprint.collective)) {
    in.target = Target::Held;
    in.held_until = Clock::now() + hold_time(h.payload_bytes);
    return;
  }
  start_buffering();
}

void PeerChannel::start_buffering() {
  Buffered entry{incoming_.header, nullptr, false, any_ ? any_->arrivals++ : arrivals_++};
  incoming_.target = Target::Buffered;
  unexpected_.push_back(std::move(entry));
}

/// Collective messages go to the first posted collective receive, so the receive a held
/// message waits for is the first one posted for this peer after it arrived.
bool PeerChannel::resume_held() {
  Incoming& in = incoming_;
  if (Choice choice = choose(in.header); choice.queue) {
    check_match((*choice.queue)[choice.index], in.header);
    in.recv = take(choice);
    in.target = Target::Posted;
    in.destination = in.recv->data;
    return true;
  }
  if (!send_stuck_ && !hold_ended_ && Clock::now() < in.held_until) return false;
  hold_ended_ = false;
  start_buffering();
  return true;
}

std::optional<Clock::time_point> PeerChannel::hold_expiry() const {
  if (incoming_.target != Target::Held || failure_) return std::nullopt;
  if (send_stuck_ || hold_ended_) return Clock::time_point{};
  return incoming_.held_until;
}

/// Room in the buffer of the message being buffered, grown (doubling from 1 MiB) as its
/// bytes arrive, so a header alone never makes us allocate more than 1 MiB (fuzzing found
/// the up-front allocation: one 40-byte header asked for 64 GiB). The first buffer is the
/// spare one when there is one (recycle()), so steady traffic does not fault in fresh pages.
std::size_t PeerChannel::grow_buffered() {
  constexpr std::size_t kFirstBufferBytes = std::size_t{1} << 20;
  Buffered& entry = unexpected_.back();
  const std::size_t bytes = entry.header.payload_bytes, done = incoming_.payload_done;
  if (done == entry.capacity && entry.capacity == 0 && spare_) {
    entry.allocated = spare_bytes_;
    entry.payload = std::move(spare_);
    spare_bytes_ = 0;
    entry.capacity = std::min(bytes, entry.allocated);
    incoming_.destination = entry.payload.get();
  }
  if (done == entry.capacity) {
    std::size_t capacity = std::min(bytes, std::max(kFirstBufferBytes, 2 * entry.capacity));
    std::unique_ptr<std::byte[]> bigger;
    try {
      bigger = std::make_unique_for_overwrite<std::byte[]>(capacity);
    } catch (const std::bad_alloc&) {
      garbage("a message of " + std::to_string(bytes) + " bytes that cannot be buffered");
    }
    if (done > 0) std::memcpy(bigger.get(), entry.payload.get(), done);
    entry.payload = std::move(bigger);
    entry.capacity = capacity;
    entry.allocated = capacity;
    incoming_.destination = entry.payload.get();
  }
  return entry.capacity - done;
}

/// Keeps the largest buffer up to kMaxSpareBytes for the next early message.
void PeerChannel::recycle(std::unique_ptr<std::byte[]> buffer, std::size_t allocated) {
  constexpr std::size_t kMaxSpareBytes = std::size_t{64} << 20;
  if (!buffer || allocated <= spare_bytes_ || allocated > kMaxSpareBytes) return;
  spare_ = std::move(buffer);
  spare_bytes_ = allocated;
}

/// A PROBE carries nothing but its header; its collective must be one we know.
void PeerChannel::route_probe(const FrameHeader& header) {
  if (header.payload_bytes != 0) {
    garbage("a probe with " + std::to_string(header.payload_bytes) + " payload bytes");
  }
  if (static_cast<int>(header.fingerprint.collective) >= kNumCollectives) {
    garbage("a probe for unknown collective " +
            std::to_string(static_cast<int>(header.fingerprint.collective)));
  }
  incoming_.target = Target::Probe;
}

void PeerChannel::finish_frame(PendingMap& pending) {
  Target target = incoming_.target;
  const Fingerprint fingerprint = incoming_.header.fingerprint;
  const std::optional<PostedRecv> recv = incoming_.recv;
  incoming_ = Incoming{};
  if (target == Target::Probe) {
    probe_ = fingerprint;
    probe_news_ = true;
    return;
  }
  if (target == Target::Abort) {
    peer_aborted_ = true;
    throw error_from_abort(peer_, abort_payload_);
  }
  if (target == Target::Posted) return complete(*recv, pending);
  unexpected_.back().complete = true;
  match_newest(pending);
}

void PeerChannel::garbage(const std::string& detail) const {
  throw Error(Status::RemoteError, "garbage on the wire from rank " + std::to_string(peer_) + " (" +
                                       std::string(link_->kind()) + "): " + detail);
}

std::size_t PeerChannel::read(void* data, std::size_t bytes) {
  if (failure_) return 0;
  try {
    return link_->read_some(data, bytes);
  } catch (const Error& error) {
    failure_ = error;
    return 0;
  }
}

std::size_t PeerChannel::write(const void* data, std::size_t bytes) {
  if (failure_) return 0;
  try {
    return link_->write_some(data, bytes);
  } catch (const Error& error) {
    failure_ = error;
    return 0;
  }
}

std::optional<Fingerprint> PeerChannel::fingerprint_of(RequestId id) const {
  for (const SendOp& op : sends_) {
    if (op.id == id) return op.header.fingerprint;
  }
  for (const PostedRecv& op : recvs_) {
    if (op.id == id) return op.fingerprint;
  }
  if (incoming_.recv && incoming_.recv->id == id) return incoming_.recv->fingerprint;
  return std::nullopt;
}

std::string PeerChannel::describe_request(RequestId id) const {
  const std::string peer = std::to_string(peer_);
  for (const SendOp& op : sends_) {
    if (op.id != id) continue;
    return "send of " + std::to_string(op.bytes) + " bytes to rank " + peer + " for " +
           describe(op.header.fingerprint) + ", " + std::to_string(op.done) + " of " +
           std::to_string(sizeof(FrameHeader) + op.bytes) + " frame bytes written";
  }
  for (const PostedRecv& op : recvs_) {
    if (op.id != id) continue;
    return "recv of " + std::to_string(op.bytes) + " bytes from rank " + peer + " for " +
           describe(op.fingerprint);
  }
  if (incoming_.recv && incoming_.recv->id == id) {
    return "recv of " + std::to_string(incoming_.recv->bytes) + " bytes from rank " + peer +
           " for " + describe(incoming_.recv->fingerprint) + ", arriving";
  }
  return "";
}

void PeerChannel::begin_abort(std::vector<std::byte> frame) {
  bool on_wire = !sends_.empty() && sends_.front().done > 0;
  while (sends_.size() > (on_wire ? 1u : 0u)) sends_.pop_back();
  abort_frame_ = std::move(frame);
  abort_done_ = 0;
}

bool PeerChannel::push_abort() {
  bool moved = false;
  if (!sends_.empty()) {
    if (!advance(sends_.front(), &moved)) return failure_.has_value();
    sends_.pop_front();
  }
  while (abort_done_ < abort_frame_.size() && !failure_) {
    std::size_t n = write(abort_frame_.data() + abort_done_, abort_frame_.size() - abort_done_);
    if (n == 0) return false;
    abort_done_ += n;
  }
  return true;
}

}  // namespace chorus::transport
