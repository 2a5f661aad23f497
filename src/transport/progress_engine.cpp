// Request bookkeeping, the wait loop and failure handling; see progress_engine.hpp.
#include "transport/progress_engine.hpp"

#include "transport/abort_frame.hpp"
#include "transport/timeout_sentence.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;

constexpr auto kLivenessPeriod = 50ms;  ///< pid checks; also the longest sleep
constexpr auto kAbortBudget = 250ms;    ///< time spent telling peers about a failure

/// The link to a peer that could not be opened: its first use reports why.
class UnreachableLink final : public Link {
 public:
  explicit UnreachableLink(Error error) : error_(std::move(error)) {}
  std::size_t write_some(const void*, std::size_t) override { throw error_; }
  std::size_t read_some(void*, std::size_t) override { throw error_; }
  int poll_fd() const override { return -1; }
  void check_peer() override {}
  std::string_view kind() const override { return "unreachable"; }

 private:
  Error error_;
};

}  // namespace

ProgressEngine::ProgressEngine(int rank, int size, Topology topology,
                               std::vector<std::unique_ptr<Link>> links, Doorbell doorbell,
                               std::unique_ptr<LinkOpener> opener)
    : rank_(rank),
      size_(size),
      topology_(std::move(topology)),
      doorbell_(doorbell),
      opener_(std::move(opener)) {
  int ranks_on_host = 0;
  for (int r = 0; r < size; ++r) ranks_on_host += topology_.same_host(rank, r) ? 1 : 0;
  wait_policy_ = WaitPolicy::for_host(ranks_on_host);
  peers_.resize(size);
  sightings_.resize(size);
  for (int p = 0; p < size && p < static_cast<int>(links.size()); ++p) {
    if (links[p]) adopt(p, std::move(links[p]));
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    throw Error(Status::SystemError, std::string("eventfd failed: ") + std::strerror(errno));
  }
  if (doorbell_.valid()) relay_ = std::make_unique<BellRelay>(doorbell_, wake_fd_);
  if (opener_) opener_->start([this]() noexcept { wake(); });
}

ProgressEngine::~ProgressEngine() {
  // abort() from another thread may be sending ABORT frames (bounded): let it finish.
  std::lock_guard lock(progress_mutex_);
  opener_.reset();  // its thread wakes this engine: stopped first
  relay_.reset();   // it sleeps on the doorbell the shm links keep mapped
  peers_.clear();
  ::close(wake_fd_);
}

void ProgressEngine::adopt(int peer, std::unique_ptr<Link> link) {
  if (link->poll_fd() >= 0) poll_peers_.push_back(peer);
  peers_[peer] = std::make_unique<PeerChannel>(rank_, peer, std::move(link), &any_, &history_);
  peers_[peer]->set_holding(true);
}

PeerChannel& ProgressEngine::channel(int peer) {
  if (!peers_[peer]) {
    if (!opener_ || !opener_->reaches(peer)) {
      throw Error(Status::InternalError,
                  "rank " + std::to_string(rank_) + " has no link to rank " + std::to_string(peer));
    }
    adopt_arrivals();  // the peer may have opened it already
  }
  if (!peers_[peer]) {
    std::unique_ptr<Link> link;
    try {
      link = opener_->open(peer);
    } catch (const Error& error) {
      link = std::make_unique<UnreachableLink>(error);
    }
    adopt(peer, std::move(link));
  }
  return *peers_[peer];
}

void ProgressEngine::adopt_arrivals() {
  if (!opener_ || !opener_->has_arrivals()) return;
  for (auto& [peer, link] : opener_->arrivals()) {
    if (!peers_[peer]) adopt(peer, std::move(link));
  }
}

void ProgressEngine::check_post(int peer, const void* data, std::size_t bytes) const {
  require_argument(peer >= 0 && peer < size_ && peer != rank_,
                   "rank " + std::to_string(rank_) + " cannot exchange messages with rank " +
                       std::to_string(peer) + " (communicator of " + std::to_string(size_) +
                       " ranks)");
  require_argument(data != nullptr || bytes == 0, "a null buffer of " + std::to_string(bytes) +
                                                      " bytes was posted for rank " +
                                                      std::to_string(peer));
}

RequestId ProgressEngine::post_send(int peer, const void* data, std::size_t bytes,
                                    const Fingerprint& fingerprint) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  check_post(peer, data, bytes);
  PeerChannel& to = channel(peer);
  RequestId id = next_id_++;
  pending_.emplace(id, peer);
  note_activity(Clock::now());
  history_.made(fingerprint);
  to.post_send(id, data, bytes, fingerprint);
  to.progress_send(pending_);  // start writing now: latency
  return id;
}

RequestId ProgressEngine::post_recv(int peer, void* data, std::size_t bytes,
                                    const Fingerprint& fingerprint) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  check_post(peer, data, bytes);
  PeerChannel& from = channel(peer);
  RequestId id = next_id_++;
  pending_.emplace(id, peer);
  note_activity(Clock::now());
  history_.made(fingerprint);
  from.post_recv(id, data, bytes, fingerprint);
  sightings_.posted_recv(peer, id, fingerprint, pending_);
  return id;
}

void ProgressEngine::check_ids(std::span<const RequestId> ids) const {
  for (RequestId id : ids) {
    if (id == 0 || id >= next_id_) {
      throw Error(Status::InvalidUsage,
                  "wait on request " + std::to_string(id) + ", which this transport never issued");
    }
  }
}

void ProgressEngine::fail(const Error& error) {
  record_failure(error.status(), error.what());
  send_abort_frames();
  throw_if_broken();  // the first failure: `error`, or an abort() that raced with it
  throw error;
}

void ProgressEngine::wait(std::span<const RequestId> ids, Deadline deadline) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  const auto start = Clock::now();
  try {
    check_ids(ids);
    if (!wait_loop(ids, deadline, /*interruptible=*/false)) {
      throw_timeout(ids, Clock::now() - start);
    }
  } catch (const Error& error) {
    fail(error);
  }
}

bool ProgressEngine::wait_until(std::span<const RequestId> ids, Deadline until) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  try {
    check_ids(ids);
    return wait_loop(ids, until, /*interruptible=*/true);
  } catch (const Error& error) {
    fail(error);
  }
}

bool ProgressEngine::test(std::span<const RequestId> ids) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  try {
    check_ids(ids);
    bool moved = false;
    if (pass(ids, Clock::now(), &moved)) return true;
    check_probes(ids, /*only_news=*/false);
    return false;
  } catch (const Error& error) {
    fail(error);
  }
}

void ProgressEngine::interrupt() noexcept {
  interrupted_.store(true, std::memory_order_seq_cst);
  wake();
}

bool ProgressEngine::pass(std::span<const RequestId> ids, Clock::time_point now, bool* moved) {
  if (now >= next_liveness_) {
    check_peers_alive();
    next_liveness_ = now + kLivenessPeriod;
  }
  *moved = progress_all();
  note_activity(now);
  if (all_done(ids)) return true;
  throw_if_broken();
  throw_if_peer_lost(ids);
  return false;
}

bool ProgressEngine::wait_loop(std::span<const RequestId> ids, Deadline until, bool interruptible) {
  check_probes(ids, /*only_news=*/false);
  Backoff backoff(wait_policy_, Clock::now());
  for (;;) {
    bool moved = false;
    if (pass(ids, Clock::now(), &moved)) return true;
    check_probes(ids, /*only_news=*/true);
    if (interruptible && interrupted_.load(std::memory_order_relaxed) &&
        interrupted_.exchange(false)) {
      return false;
    }
    const auto now = Clock::now();
    if (now >= until) return false;
    maybe_probe(ids, now);
    const Backoff::Action action = moved ? Backoff::Action::Spin : backoff.next(now);
    if (moved) {
      backoff.restart(now);
    } else if (action == Backoff::Action::Spin) {
      cpu_relax();
    } else if (action == Backoff::Action::Yield) {
      sched_yield();
    } else if (sleep(std::min(until, next_liveness_), interruptible)) {
      backoff.restart(Clock::now());
    }
  }
}

bool ProgressEngine::progress_all() {
  adopt_arrivals();
  bool moved = false;
  for (auto& peer : peers_) {
    if (peer && peer->progress(pending_)) moved = true;
  }
  return moved;
}

bool ProgressEngine::all_done(std::span<const RequestId> ids) const {
  return std::none_of(ids.begin(), ids.end(),
                      [&](RequestId id) { return pending_.count(id) || any_.pending.count(id); });
}

void ProgressEngine::check_peers_alive() {
  for (auto& peer : peers_) {
    if (peer) peer->link().check_peer();
  }
}

void ProgressEngine::note_activity(Clock::time_point now) {
  if (pending_.size() == pending_seen_) return;
  pending_seen_ = pending_.size();
  stall_.activity(now);
}

/// A request on a peer that is gone can never complete: progress_all() has
/// already taken everything the peer sent before it went.
void ProgressEngine::throw_if_peer_lost(std::span<const RequestId> ids) const {
  throw_if_any_source_lost(ids);
  for (RequestId id : ids) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    const auto& failure = peers_[it->second]->failure();
    if (failure) throw *failure;
  }
}

void ProgressEngine::throw_timeout(std::span<const RequestId> ids, Clock::duration waited) const {
  std::set<int> ranks;
  bool any_rank = false;  // an any-source receive waits for every peer
  std::string first;
  std::size_t more = 0;
  for (RequestId id : ids) {
    std::string text;
    if (auto it = pending_.find(id); it != pending_.end()) {
      ranks.insert(it->second);
      text = peers_[it->second]->describe_request(id);
    } else if (any_.pending.count(id)) {
      any_rank = true;
      text = describe_any_source(id);
    } else {
      continue;
    }
    if (first.empty()) {
      first = std::move(text);
    } else {
      ++more;
    }
  }
  std::string list;
  for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  if (any_rank) list += list.empty() ? "any" : ", any";
  TimedOutWait wait{rank_,
                    std::nullopt,
                    waited,
                    list,
                    first + (more > 0 ? ", and " + std::to_string(more) + " more" : ""),
                    {}};
  const std::vector<Fingerprint> calls = pending_calls(ids);
  if (!calls.empty()) {  // the oldest collective is the one this rank is blocked in
    wait.call = *std::min_element(calls.begin(), calls.end(),
                                  [](const auto& a, const auto& b) { return a.seq < b.seq; });
    wait.last_seen = last_seen();
  }
  throw Error(Status::Timeout, timeout_sentence(wait));
}

/// Sleeps until something may have happened for this rank, or `until`.
/// Returns true when a last look before sleeping found progress.
bool ProgressEngine::sleep(Deadline until, bool interruptible) {
  for (const auto& peer : peers_) {  // a held message is buffered when its hold ends
    if (!peer) continue;
    if (auto expiry = peer->hold_expiry()) until = std::min(until, *expiry);
  }
  int timeout = std::max(1, remaining_ms(until));
  std::uint32_t sequence = doorbell_.valid() ? doorbell_.arm() : 0;
  struct Disarm {
    const Doorbell& bell;
    ~Disarm() {
      if (bell.valid()) bell.disarm();
    }
  } disarm{doorbell_};
  // Work that arrived between the last round and arm(), an abort or an interrupt ends the sleep.
  if (progress_all() || broken_.load(std::memory_order_acquire) ||
      (interruptible && interrupted_.load(std::memory_order_seq_cst))) {
    return true;
  }
  if (poll_peers_.empty() && doorbell_.valid()) {
    doorbell_.sleep(sequence, timeout);
    return false;
  }
  std::vector<pollfd> fds;
  std::vector<int> fd_peers;  // fds[i + 1] belongs to rank fd_peers[i]
  fds.push_back(pollfd{wake_fd_, POLLIN, 0});
  for (int p : poll_peers_) {
    if (peers_[p]->failure()) continue;  // a closed socket would be "ready" forever
    // While a message is held its bytes wait in the socket, which would be readable at once.
    const short in = peers_[p]->hold_expiry() ? 0 : POLLIN;
    fds.push_back(pollfd{peers_[p]->link().poll_fd(),
                         static_cast<short>(in | (peers_[p]->wants_write() ? POLLOUT : 0)), 0});
    fd_peers.push_back(p);
  }
  // With shared-memory peers too, the relay sleeps on the doorbell meanwhile and ends the
  // poll through wake_fd_ when it rings.
  if (relay_) relay_->watch(sequence);
  polls_.fetch_add(1, std::memory_order_relaxed);
  ::poll(fds.data(), fds.size(), timeout);
  if (relay_) relay_->unwatch();
  if (fds[0].revents & POLLIN) {
    std::uint64_t drained = 0;
    ssize_t ignored = ::read(wake_fd_, &drained, sizeof(drained));
    (void)ignored;
  }
  // A peer that hung up sends nothing more: read on behind its held message, to the failure.
  for (std::size_t i = 0; i < fd_peers.size(); ++i) {
    if (fds[i + 1].revents & (POLLHUP | POLLERR)) peers_[fd_peers[i]]->end_hold();
  }
  return false;
}

void ProgressEngine::wake() noexcept {
  std::uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
  (void)ignored;
  if (doorbell_.valid()) doorbell_.ring();
}

void ProgressEngine::abort(Status status, const std::string& reason) {
  record_failure(status, reason);
  wake();
  // A thread inside wait() holds the mutex and sends the frames itself.
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  if (lock.owns_lock()) send_abort_frames();
}

void ProgressEngine::record_failure(Status status, const std::string& reason) {
  std::lock_guard lock(failure_mutex_);
  if (failure_) return;
  failure_.emplace(status, reason);
  broken_.store(true, std::memory_order_release);
}

void ProgressEngine::throw_if_broken() const {
  if (!broken_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failure_mutex_);
  throw *failure_;
}

void ProgressEngine::arena_check(const Fingerprint& call, bool send_probe) {
  std::lock_guard lock(progress_mutex_);
  throw_if_broken();
  try {
    const auto now = Clock::now();
    if (now >= next_liveness_) {
      check_peers_alive();
      next_liveness_ = now + kLivenessPeriod;
    }
    progress_all();
    throw_if_broken();
    // A lost peer ends the call only if the arena still waits for it (arena_lost).
    for (int p = 0; p < size_; ++p) {
      PeerChannel* peer = peers_[p].get();
      if (!peer) continue;
      peer->take_probe_news();
      if (peer->probe()) {
        judge_probe(p, std::span<const Fingerprint>(&call, 1));
        if (peer->probe()->seq <= call.seq) peer->drop_probe();
      }
      if (send_probe) {
        peer->post_probe(call);
        peer->progress_send(pending_);
      }
    }
  } catch (const Error& error) {
    fail(error);
  }
}

std::optional<Error> ProgressEngine::arena_lost(int r) {
  std::lock_guard lock(progress_mutex_);
  const PeerChannel* peer = r >= 0 && r < size_ ? peers_[r].get() : nullptr;
  return peer ? peer->failure() : std::nullopt;
}

void ProgressEngine::arena_fail(const Error& error) {
  std::lock_guard lock(progress_mutex_);
  fail(error);
}

std::vector<std::optional<Fingerprint>> ProgressEngine::arena_sightings() {
  std::lock_guard lock(progress_mutex_);
  return last_seen();
}

void ProgressEngine::send_abort_frames() noexcept {
  if (abort_sent_) return;
  abort_sent_ = true;
  try {
    std::vector<std::byte> frame;
    {
      std::lock_guard lock(failure_mutex_);
      frame = make_abort_frame(failure_->status(), failure_->what());
    }
    if (opener_) {  // links opened later hear it from the opener; those here now, below
      opener_->abort_arrivals(frame);
      adopt_arrivals();
    }
    std::vector<PeerChannel*> targets;
    for (auto& peer : peers_) {
      if (peer && !peer->failure() && !peer->sent_abort()) {
        peer->begin_abort(frame);
        targets.push_back(peer.get());
      }
    }
    const auto until = Clock::now() + kAbortBudget;
    while (!targets.empty() && Clock::now() < until) {
      std::erase_if(targets, [](PeerChannel* peer) { return peer->push_abort(); });
      if (!targets.empty()) std::this_thread::sleep_for(1ms);
    }
  } catch (...) {
    // Best effort: peers that were not told notice the closed link or time out.
  }
}

}  // namespace chorus::transport
