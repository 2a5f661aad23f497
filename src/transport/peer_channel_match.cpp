// Matching of messages to posted receives; see peer_channel.hpp.
#include "transport/peer_channel.hpp"

#include <cstring>

namespace chorus::transport {
namespace {

bool point_to_point(const Fingerprint& fingerprint) {
  return is_point_to_point(fingerprint.collective);
}

/// True when a message with `header` may go to `op` (same space; for point-to-point, same tag).
bool candidate(const PostedRecv& op, const FrameHeader& header) {
  const bool p2p = point_to_point(header.fingerprint);
  if (p2p != point_to_point(op.fingerprint)) return false;
  return !p2p || op.fingerprint.root == header.fingerprint.root;
}

/// The first candidate for `header` in `queue` (posting order).
std::optional<std::size_t> first_candidate(const std::deque<PostedRecv>& queue,
                                           const FrameHeader& header) {
  for (std::size_t i = 0; i < queue.size(); ++i) {
    if (candidate(queue[i], header)) return i;
  }
  return std::nullopt;
}

/// describe(), plus the tag of a point-to-point call (the comm layer's tags are >= 0).
std::string describe_call(const Fingerprint& fingerprint, bool any_source) {
  std::string text = (any_source ? "any-source " : "") + describe(fingerprint);
  if (point_to_point(fingerprint) && fingerprint.root >= 0) {
    text += " with tag " + std::to_string(fingerprint.root);
  }
  return text;
}

}  // namespace

PeerChannel::Choice PeerChannel::choose(const FrameHeader& header) {
  Choice named;
  if (auto i = first_candidate(recvs_, header)) named = Choice{&recvs_, *i};
  if (!point_to_point(header.fingerprint) || any_ == nullptr) return named;
  Choice any;
  if (auto i = first_candidate(any_->recvs, header)) any = Choice{&any_->recvs, *i};
  if (!any.queue) return named;
  if (!named.queue) return any;
  // Both kinds wait for this message: the one posted first takes it.
  return (*named.queue)[named.index].id < (*any.queue)[any.index].id ? named : any;
}

PostedRecv PeerChannel::take(Choice choice) {
  PostedRecv op = (*choice.queue)[choice.index];
  choice.queue->erase(choice.queue->begin() + static_cast<std::ptrdiff_t>(choice.index));
  return op;
}

void PeerChannel::complete(const PostedRecv& op, PendingMap& pending) {
  if (op.source != nullptr) {
    *op.source = peer_;
    if (any_ != nullptr) any_->pending.erase(op.id);
  }
  pending.erase(op.id);
}

/// Buffered messages are complete except possibly the last (the one arriving now), so
/// handing them over in arrival order keeps every (peer, tag) stream and the collective
/// stream in order.
void PeerChannel::match_buffered(PendingMap& pending) {
  recv_posted_ = false;
  for (auto it = unexpected_.begin(); it != unexpected_.end() && it->complete;) {
    it = hand_over(it, pending) ? unexpected_.erase(it) : it + 1;
  }
  if (!unexpected_.empty() && !unexpected_.back().complete) adopt_incoming();
}

/// The message arriving now was buffered because its receive came late. If a receive naming
/// this peer now waits for it, what arrived so far is copied there and the rest streams in
/// directly (a large message is then copied once, not twice). Any-source receives are left to
/// the complete-message path: they take the earliest complete arrival over all channels.
void PeerChannel::adopt_incoming() {
  Buffered& message = unexpected_.back();
  Choice choice = choose(message.header);
  if (choice.queue != &recvs_) return;
  check_match((*choice.queue)[choice.index], message.header);
  PostedRecv op = take(choice);
  const std::size_t done = incoming_.payload_done;
  if (done > 0) std::memcpy(op.data, message.payload.get(), done);
  recycle(std::move(message.payload), message.allocated);
  unexpected_.pop_back();
  incoming_.target = Target::Posted;
  incoming_.destination = op.data;
  incoming_.recv = op;
}

/// By the invariant, a message that just completed is the only buffered one that may match.
void PeerChannel::match_newest(PendingMap& pending) {
  if (recv_posted_) return match_buffered(pending);
  if (hand_over(unexpected_.end() - 1, pending)) unexpected_.pop_back();
}

bool PeerChannel::hand_over(std::deque<Buffered>::iterator message, PendingMap& pending) {
  Choice choice = choose(message->header);
  if (!choice.queue) return false;
  check_match((*choice.queue)[choice.index], message->header);
  PostedRecv op = take(choice);
  if (op.bytes > 0) std::memcpy(op.data, message->payload.get(), op.bytes);
  recycle(std::move(message->payload), message->allocated);
  complete(op, pending);
  return true;
}

std::optional<std::uint64_t> PeerChannel::buffered_stamp(const Fingerprint& fingerprint) const {
  PostedRecv probe{0, nullptr, 0, fingerprint, nullptr};
  for (const Buffered& message : unexpected_) {
    if (message.complete && candidate(probe, message.header)) return message.stamp;
  }
  return std::nullopt;
}

void PeerChannel::check_match(const PostedRecv& op, const FrameHeader& header) const {
  const std::string me = "rank " + std::to_string(self_);
  const std::string them = "rank " + std::to_string(peer_);
  const bool any_source = op.source != nullptr;
  Fingerprint expected = op.fingerprint;
  if (point_to_point(expected) && (expected.reserved & kAnySeq) != 0) {
    expected.seq = header.fingerprint.seq;
    expected.reserved = 0;
  }
  if (!fingerprints_match(expected, header.fingerprint)) {
    // A message of an older call this rank made otherwise: name that call of ours.
    if (history_ != nullptr && header.fingerprint.seq < expected.seq) {
      if (auto sentence = history_->conflict(self_, peer_, header.fingerprint, "sent")) {
        throw Error(Status::Mismatch, *sentence);
      }
    }
    throw Error(Status::Mismatch, me + " is in " + describe_call(op.fingerprint, any_source) +
                                      " but " + them + " sent " +
                                      describe_call(header.fingerprint, false));
  }
  if (header.payload_bytes != op.bytes) {
    throw Error(Status::Mismatch, me + " expected " + std::to_string(op.bytes) + " bytes from " +
                                      them + " for " + describe_call(op.fingerprint, any_source) +
                                      " but " + them + " sent " +
                                      std::to_string(header.payload_bytes) + " bytes");
  }
}

}  // namespace chorus::transport
