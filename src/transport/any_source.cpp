// Any-source receives of the ProgressEngine (see transport.hpp, peer_channel.hpp).
#include "transport/progress_engine.hpp"

namespace chorus::transport {

/// Posting order decides between receives that want the same message, so earlier named
/// receives first take what is buffered for them; then the new receive takes the earliest
/// complete buffered message with its tag over every channel, or waits for the next one.
/// It waits on every peer, so it first opens every link not yet open: losing any peer then
/// fails it.
RequestId ProgressEngine::post_recv_any(void* data, std::size_t bytes,
                                        const Fingerprint& fingerprint, int* source) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  require_argument(data != nullptr || bytes == 0,
                   "a null buffer of " + std::to_string(bytes) + " bytes was posted for any rank");
  require_argument(source != nullptr, "an any-source receive needs somewhere to put the source");
  require_argument(size_ > 1, "rank " + std::to_string(rank_) +
                                  " posted an any-source receive but is alone in its communicator");
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) channel(p);
  }
  RequestId id = next_id_++;
  try {
    for (auto& peer : peers_) {
      if (peer) peer->match_buffered(pending_);
    }
    any_.recvs.push_back(PostedRecv{id, static_cast<std::byte*>(data), bytes, fingerprint, source});
    any_.pending.insert(id);
    PeerChannel* earliest = nullptr;
    std::uint64_t earliest_stamp = 0;
    for (auto& peer : peers_) {
      if (!peer) continue;
      auto stamp = peer->buffered_stamp(fingerprint);
      if (stamp && (!earliest || *stamp < earliest_stamp)) {
        earliest = peer.get();
        earliest_stamp = *stamp;
      }
    }
    if (earliest) earliest->match_buffered(pending_);
  } catch (const Error& error) {
    fail(error);
  }
  stall_.activity(Clock::now());
  return id;
}

void ProgressEngine::throw_if_any_source_lost(std::span<const RequestId> ids) const {
  for (RequestId id : ids) {
    if (!any_.pending.count(id)) continue;
    for (const auto& peer : peers_) {
      if (peer && peer->failure()) throw *peer->failure();
    }
  }
}

std::string ProgressEngine::describe_any_source(RequestId id) const {
  for (const PostedRecv& op : any_.recvs) {
    if (op.id == id) {
      return "any-source recv of " + std::to_string(op.bytes) + " bytes for " +
             describe(op.fingerprint);
    }
  }
  for (const auto& peer : peers_) {  // matched: its message is arriving from that peer
    if (!peer) continue;
    std::string text = peer->describe_request(id);
    if (!text.empty()) return "any-source " + text;
  }
  return "";
}

}  // namespace chorus::transport
