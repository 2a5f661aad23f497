// Stall probes: the engine's side (sending, judging) and the conflict rule; see stall_probe.hpp.
#include "transport/stall_probe.hpp"

#include "transport/progress_engine.hpp"

#include <algorithm>

namespace chorus::transport {

std::optional<std::string> probe_conflict(int self, const Fingerprint& mine, int peer,
                                          const Fingerprint& theirs) {
  if (is_point_to_point(mine.collective) || is_point_to_point(theirs.collective)) {
    return std::nullopt;  // their seq counts the messages of one pair, not calls
  }
  if (mine.seq != theirs.seq || fingerprints_match(mine, theirs)) return std::nullopt;
  return "rank " + std::to_string(self) + " is in " + describe(mine) + " but rank " +
         std::to_string(peer) + " is in " + describe(theirs);
}

void PeerSightings::saw(int peer, const Fingerprint& call) {
  if (is_point_to_point(call.collective)) return;
  std::optional<Fingerprint>& seen = seen_[peer];
  if (!seen || seen->seq < call.seq) seen = call;
}

void PeerSightings::posted_recv(int peer, RequestId id, const Fingerprint& call,
                                const PendingMap& pending) {
  if (is_point_to_point(call.collective)) return;
  Recv& latest = latest_recv_[peer];
  if (latest.id != 0 && !pending.count(latest.id)) saw(peer, latest.call);  // it completed
  latest = Recv{id, call};
}

std::optional<Fingerprint> PeerSightings::last(int peer, const PendingMap& pending) const {
  std::optional<Fingerprint> seen = seen_[peer];
  const Recv& latest = latest_recv_[peer];
  if (latest.id != 0 && !pending.count(latest.id) && (!seen || seen->seq < latest.call.seq)) {
    seen = latest.call;
  }
  return seen;
}

std::vector<std::optional<Fingerprint>> ProgressEngine::last_seen() const {
  std::vector<std::optional<Fingerprint>> seen(size_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !peers_[p]) continue;
    seen[p] = sightings_.last(p, pending_);
    const std::optional<Fingerprint>& probe = peers_[p]->probe();
    if (probe && !is_point_to_point(probe->collective) && (!seen[p] || seen[p]->seq < probe->seq)) {
      seen[p] = probe;
    }
  }
  return seen;
}

std::vector<Fingerprint> ProgressEngine::pending_calls(std::span<const RequestId> ids) const {
  std::vector<Fingerprint> calls;
  for (RequestId id : ids) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    std::optional<Fingerprint> fingerprint = peers_[it->second]->fingerprint_of(id);
    if (fingerprint && !is_point_to_point(fingerprint->collective)) calls.push_back(*fingerprint);
  }
  return calls;
}

void ProgressEngine::maybe_probe(std::span<const RequestId> ids, Clock::time_point now) {
  if (!stall_.probe_due(now)) return;
  std::vector<Fingerprint> calls = pending_calls(ids);
  if (calls.empty()) return;
  // The oldest call is the one this rank is blocked in; later ones may not have started.
  const Fingerprint& oldest = *std::min_element(
      calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  for (auto& peer : peers_) {
    if (!peer || peer->failure()) continue;
    peer->post_probe(oldest);
    peer->progress_send(pending_);
  }
}

void ProgressEngine::judge_probe(int p, std::span<const Fingerprint> calls) {
  const Fingerprint& probe = *peers_[p]->probe();
  sightings_.saw(p, probe);
  for (const Fingerprint& call : calls) {
    if (auto sentence = probe_conflict(rank_, call, p, probe)) {
      throw Error(Status::Mismatch, *sentence);
    }
  }
  // A call this rank already left (a group that finished it without the prober).
  if (auto sentence = history_.conflict(rank_, p, probe, "is in")) {
    throw Error(Status::Mismatch, *sentence);
  }
}

void ProgressEngine::check_probes(std::span<const RequestId> ids, bool only_news) {
  bool relevant = false;
  for (auto& peer : peers_) {
    if (!peer) continue;
    bool news = peer->take_probe_news();  // every flag is taken, none short-circuited
    if (news || (!only_news && peer->probe())) relevant = true;
  }
  if (!relevant) return;
  std::vector<Fingerprint> calls = pending_calls(ids);
  if (calls.empty()) return;
  std::uint64_t newest = 0;
  for (const Fingerprint& call : calls) newest = std::max(newest, call.seq);
  for (int p = 0; p < size_; ++p) {
    PeerChannel* peer = peers_[p].get();
    if (!peer || !peer->probe()) continue;
    judge_probe(p, calls);
    // A call this rank has reached and matched (or passed) tells nothing more.
    if (peer->probe()->seq <= newest) peer->drop_probe();
  }
}

}  // namespace chorus::transport
