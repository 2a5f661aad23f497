// In-process transport for tests (see memory_transport.hpp).
#include "memory_transport.hpp"

#include "bootstrap/store.hpp"
#include "transport/arena/segment.hpp"

#include <chorus/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_set>
#include <utility>

namespace chorus::testing {

class MemoryEndpoint final : public transport::Transport, public transport::Liveness {
 public:
  MemoryEndpoint(MemoryFabric& fabric, int rank, int size);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const Topology& topology() const override { return topology_; }
  void set_topology(const Topology& topology) { topology_ = topology; }
  transport::RequestId post_send(int peer, const void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override;
  transport::RequestId post_recv(int peer, void* data, std::size_t bytes,
                                 const Fingerprint& fingerprint) override;
  void wait(std::span<const transport::RequestId> ids, Deadline deadline) override;
  bool test(std::span<const transport::RequestId> ids) override;
  bool wait_until(std::span<const transport::RequestId> ids, Deadline until) override;
  void interrupt() noexcept override;
  void abort(Status status, const std::string& reason) override;

  // Liveness: an arena wait fails when the fabric broke (a rank threw or aborted).
  void arena_check(const Fingerprint&, bool) override { arena_throw_if_broken(); }
  std::optional<Error> arena_lost(int) override { return std::nullopt; }
  [[noreturn]] void arena_fail(const Error& error) override {
    std::lock_guard lock(mutex_);
    fail_locked(error.status(), error.what());
  }
  void arena_throw_if_broken() override {
    std::lock_guard lock(mutex_);
    throw_if_broken_locked();
  }

  std::uint64_t messages_sent() const { return messages_sent_.load(); }
  /// Called from the sender's thread: queues a message from `from`.
  void deliver(int from, Fingerprint fingerprint, std::vector<std::byte> bytes);
  /// Breaks this endpoint (the first reason wins) and wakes its wait().
  void break_with(Status status, const std::string& reason);

 private:
  struct Message {
    Fingerprint fingerprint;
    std::vector<std::byte> bytes;
  };
  struct PostedRecv {
    transport::RequestId id;
    void* data;
    std::size_t bytes;
    Fingerprint fingerprint;
  };

  void check_peer(int peer, const char* what) const;
  void throw_if_broken_locked() const;
  [[noreturn]] void fail_locked(Status status, const std::string& reason);
  void match_locked();
  bool all_done_locked(std::span<const transport::RequestId> ids) const;
  std::string awaited_peers_locked(std::span<const transport::RequestId> ids) const;

  MemoryFabric& fabric_;
  const int rank_;
  const int size_;
  Topology topology_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::deque<Message>> inbox_;      // per sender, arrival order
  std::vector<std::deque<PostedRecv>> posted_;  // per sender, posting order
  std::unordered_set<transport::RequestId> incomplete_;
  transport::RequestId next_id_ = 1;
  std::optional<std::pair<Status, std::string>> broken_;
  bool interrupted_ = false;  ///< set by interrupt(), taken by wait_until()
  std::atomic<std::uint64_t> messages_sent_{0};
};

MemoryEndpoint::MemoryEndpoint(MemoryFabric& fabric, int rank, int size)
    : fabric_(fabric),
      rank_(rank),
      size_(size),
      inbox_(static_cast<std::size_t>(size)),
      posted_(static_cast<std::size_t>(size)) {
  topology_.host_of_rank.assign(static_cast<std::size_t>(size), 0);
  topology_.num_hosts = 1;
}

void MemoryEndpoint::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw Error(Status::InternalError, "rank " + std::to_string(rank_) + " posted a " + what +
                                           " to invalid peer " + std::to_string(peer));
  }
}

void MemoryEndpoint::throw_if_broken_locked() const {
  if (broken_) throw Error(broken_->first, broken_->second);
}

void MemoryEndpoint::fail_locked(Status status, const std::string& reason) {
  if (!broken_) broken_.emplace(status, reason);
  throw Error(broken_->first, broken_->second);
}

transport::RequestId MemoryEndpoint::post_send(int peer, const void* data, std::size_t bytes,
                                               const Fingerprint& fingerprint) {
  check_peer(peer, "send");
  transport::RequestId id;
  {
    std::lock_guard lock(mutex_);
    throw_if_broken_locked();
    id = next_id_++;
  }
  std::vector<std::byte> copy(bytes);
  if (bytes > 0) std::memcpy(copy.data(), data, bytes);
  fabric_.endpoint(peer).deliver(rank_, fingerprint, std::move(copy));
  ++messages_sent_;
  return id;
}

transport::RequestId MemoryEndpoint::post_recv(int peer, void* data, std::size_t bytes,
                                               const Fingerprint& fingerprint) {
  check_peer(peer, "receive");
  std::lock_guard lock(mutex_);
  throw_if_broken_locked();
  transport::RequestId id = next_id_++;
  posted_[static_cast<std::size_t>(peer)].push_back({id, data, bytes, fingerprint});
  incomplete_.insert(id);
  return id;
}

void MemoryEndpoint::deliver(int from, Fingerprint fingerprint, std::vector<std::byte> bytes) {
  {
    std::lock_guard lock(mutex_);
    inbox_[static_cast<std::size_t>(from)].push_back({fingerprint, std::move(bytes)});
  }
  changed_.notify_all();
}

void MemoryEndpoint::break_with(Status status, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_) broken_.emplace(status, reason);
  }
  changed_.notify_all();
}

// Pairs the oldest message from each peer with the oldest receive posted for it.
void MemoryEndpoint::match_locked() {
  for (int peer = 0; peer < size_; ++peer) {
    auto& messages = inbox_[static_cast<std::size_t>(peer)];
    auto& receives = posted_[static_cast<std::size_t>(peer)];
    while (!messages.empty() && !receives.empty()) {
      Message& message = messages.front();
      PostedRecv& receive = receives.front();
      if (!fingerprints_match(receive.fingerprint, message.fingerprint) ||
          receive.bytes != message.bytes.size()) {
        fail_locked(Status::Mismatch,
                    "rank " + std::to_string(rank_) + " expected " + describe(receive.fingerprint) +
                        " (" + std::to_string(receive.bytes) + " bytes) from rank " +
                        std::to_string(peer) + " but received " + describe(message.fingerprint) +
                        " (" + std::to_string(message.bytes.size()) + " bytes)");
      }
      if (receive.bytes > 0) std::memcpy(receive.data, message.bytes.data(), receive.bytes);
      incomplete_.erase(receive.id);
      messages.pop_front();
      receives.pop_front();
    }
  }
}

bool MemoryEndpoint::all_done_locked(std::span<const transport::RequestId> ids) const {
  for (transport::RequestId id : ids) {
    if (incomplete_.count(id) != 0) return false;
  }
  return true;
}

std::string MemoryEndpoint::awaited_peers_locked(std::span<const transport::RequestId> ids) const {
  std::set<int> peers;
  std::unordered_set<transport::RequestId> wanted(ids.begin(), ids.end());
  for (int peer = 0; peer < size_; ++peer) {
    for (const PostedRecv& receive : posted_[static_cast<std::size_t>(peer)]) {
      if (wanted.count(receive.id) != 0) peers.insert(peer);
    }
  }
  std::string text;
  for (int peer : peers) text += (text.empty() ? "" : ", ") + std::to_string(peer);
  return text;
}

void MemoryEndpoint::wait(std::span<const transport::RequestId> ids, Deadline deadline) {
  std::unique_lock lock(mutex_);
  for (;;) {
    throw_if_broken_locked();
    match_locked();
    if (all_done_locked(ids)) return;
    if (Clock::now() >= deadline) {
      fail_locked(Status::Timeout, "rank " + std::to_string(rank_) +
                                       " timed out waiting for rank(s) " +
                                       awaited_peers_locked(ids));
    }
    changed_.wait_until(lock, deadline);
  }
}

bool MemoryEndpoint::test(std::span<const transport::RequestId> ids) {
  std::lock_guard lock(mutex_);
  throw_if_broken_locked();
  match_locked();
  return all_done_locked(ids);
}

bool MemoryEndpoint::wait_until(std::span<const transport::RequestId> ids, Deadline until) {
  std::unique_lock lock(mutex_);
  for (;;) {
    throw_if_broken_locked();
    match_locked();
    if (all_done_locked(ids)) return true;
    if (std::exchange(interrupted_, false) || Clock::now() >= until) return false;
    changed_.wait_until(lock, until);
  }
}

void MemoryEndpoint::interrupt() noexcept {
  {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
  }
  changed_.notify_all();
}

void MemoryEndpoint::abort(Status status, const std::string& reason) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) {
      break_with(status, reason);
    } else {
      fabric_.endpoint(peer).break_with(Status::RemoteError,
                                        "rank " + std::to_string(rank_) + " aborted: " + reason);
    }
  }
}

MemoryFabric::MemoryFabric(int size) {
  for (int rank = 0; rank < size; ++rank) {
    endpoints_.push_back(std::make_unique<MemoryEndpoint>(*this, rank, size));
  }
}

MemoryFabric::MemoryFabric(const std::vector<int>& host_of_rank)
    : MemoryFabric(static_cast<int>(host_of_rank.size())) {
  Topology topology;
  topology.host_of_rank = host_of_rank;
  for (int host : host_of_rank) topology.num_hosts = std::max(topology.num_hosts, host + 1);
  for (auto& endpoint : endpoints_) endpoint->set_topology(topology);
}

MemoryFabric::~MemoryFabric() { arenas_.clear(); }  // before the endpoints they ask

void MemoryFabric::attach_arenas() {
  const int n = size();
  arenas_.resize(static_cast<std::size_t>(n));
  std::shared_ptr<Store> store = make_memory_store();
  const std::string token = "sweep-" + std::to_string(::getpid()) + "-" +
                            std::to_string(reinterpret_cast<std::uintptr_t>(this));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      auto arena = transport::HostArena::connect(*store, rank, n, token,
                                                 Clock::now() + std::chrono::seconds(30));
      arena->set_liveness(&endpoint(rank));
      arenas_[static_cast<std::size_t>(rank)] = std::move(arena);
    });
  }
  for (auto& thread : threads) thread.join();
}

void MemoryFabric::attach_windows(std::size_t bytes_per_rank) {
  if (arenas_.empty() || !windows_.empty() || bytes_per_rank == 0) {
    throw Error(Status::InvalidUsage, "attach_windows(" + std::to_string(bytes_per_rank) +
                                          "): once, after attach_arenas, with some bytes");
  }
  constexpr std::size_t kPage = 4096;
  const std::size_t stride = (bytes_per_rank + kPage - 1) / kPage * kPage;
  const auto n = static_cast<std::size_t>(size());
  const std::string name = "/chorus-sweep-w-" + std::to_string(::getpid()) + "-" +
                           std::to_string(reinterpret_cast<std::uintptr_t>(this));
  auto created = transport::Segment::create(name, stride * n);
  windows_.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    auto segment = r == 0 ? created
                          : transport::Segment::open(created->locator(), stride * n,
                                                     Clock::now() + std::chrono::seconds(30));
    transport::WindowTable& table = arenas_[r]->windows();
    std::byte* part =
        table.add(table.next_id(), std::move(segment), stride, bytes_per_rank, static_cast<int>(r));
    windows_[r] = {part, bytes_per_rank};
  }
  created->withdraw();
}

std::span<std::byte> MemoryFabric::window(int rank) const {
  return windows_.empty() ? std::span<std::byte>() : windows_[static_cast<std::size_t>(rank)];
}

transport::HostArena* MemoryFabric::arena(int rank) const {
  return arenas_.empty() ? nullptr : arenas_[static_cast<std::size_t>(rank)].get();
}

transport::Transport& MemoryFabric::transport(int rank) { return endpoint(rank); }

std::uint64_t MemoryFabric::messages_sent(int rank) const { return endpoint(rank).messages_sent(); }

std::vector<std::string> run_ranks(int size,
                                   const std::function<void(transport::Transport&, int)>& body) {
  MemoryFabric fabric(size);
  return run_ranks(fabric, body);
}

std::vector<std::string> run_ranks(MemoryFabric& fabric,
                                   const std::function<void(transport::Transport&, int)>& body) {
  const int size = fabric.size();
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(fabric.transport(rank), rank);
      } catch (const std::exception& e) {
        const auto* error = dynamic_cast<const Error*>(&e);
        fabric.transport(rank).abort(error ? error->status() : Status::InternalError, e.what());
        std::lock_guard lock(mutex);
        failures.push_back("rank " + std::to_string(rank) + ": " + e.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return failures;
}

}  // namespace chorus::testing
