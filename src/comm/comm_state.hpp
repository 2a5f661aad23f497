// What a Communicator handle points to.
#pragma once

#include "algorithms/selection.hpp"
#include "bootstrap/store.hpp"
#include "comm/call_plan.hpp"
#include "comm/executor.hpp"
#include "comm/roots_digest.hpp"
#include "core/collective.hpp"
#include "core/env.hpp"
#include "core/yielding_lock.hpp"
#include "transport/arena/host_arena.hpp"
#include "transport/transport.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace chorus::detail {

struct CommState {
  int rank = 0;
  int size = 1;
  Config config;
  std::vector<algorithms::AlgorithmOverride> algorithm_overrides;  ///< CHORUS_ALGO, parsed once
  algorithms::SelectionContext selection;      ///< ranks, topology, link kinds, CHORUS_TUNING_FILE
  algorithms::SelectionCache selection_cache;  ///< choices made so far (used by the executor only)
  std::string name;                     ///< store namespace, unique per communicator of the job
  std::string trace_job;                ///< the job's id in flight-recorder file names
  std::string trace_name;               ///< Communicator::name(): "world", "world.split1.color0"
  int world_rank = 0;                   ///< rank in the world communicator (file names)
  std::shared_ptr<StoreServer> server;  ///< set on the rank that hosts the store
  std::shared_ptr<Store> store;         ///< the job's store client, shared with sub-communicators
  std::unique_ptr<transport::Transport> transport;
  /// The host arena (transport/mesh.hpp's Connection), handed to the algorithms that work in
  /// it; null unless every rank shares this host. Declared after `transport`, which it
  /// asks about liveness, so that it goes first.
  std::unique_ptr<transport::HostArena> arena;
  std::shared_ptr<Executor> executor;

  // Issue-time counters (touched only by the issuing thread under issue_mutex). Held only
  // to stamp an operation and hand it to the executor (a short, non-blocking section).
  YieldingLock issue_mutex;
  std::uint64_t collective_seq = 0;
  RootsDigest roots_digest;  ///< roots of rooted calls, checked by the next barrier
  PlanTable plans;           ///< blocking calls' shapes planned so far (call_plan.hpp)
  std::uint64_t split_seq = 0;
  std::vector<std::uint64_t> send_seq, recv_seq;  ///< per peer

  std::atomic<bool> aborted{false};
  // alloc_shared's ordinary allocations (no arena; comm/shared_memory.cpp).
  std::mutex shared_mutex;
  std::vector<void*> plain_shared;
  mutable std::mutex error_mutex;
  std::string last_error;
  /// A registered algorithm's name (static storage). Written under error_mutex by the
  /// running step only, which may therefore read it without the lock.
  std::string_view last_algorithm;
  /// (collective, size bucket = bit_width(bytes), algorithm) choices already logged at INFO.
  std::set<std::tuple<int, int, std::string_view>> logged_choices;

  void record_error(const std::string& message) {
    std::lock_guard lock(error_mutex);
    last_error = message;
  }
  ~CommState();
};

}  // namespace chorus::detail
