// The launchers of a job of several nodes agreeing on restarts through the job's store
// (--nnodes > 1 with --max-restarts > 0), as torchrun's agents do through their rendezvous.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <chorus/error.hpp>

#include "bootstrap/store.hpp"
#include "core/deadline.hpp"

#include "launcher.hpp"
#include "signals.hpp"

namespace chorus::run {

/// Where the job's store is and who this launcher is.
struct AgreementSetup {
  std::string store_host;  ///< node 0's host (node 0's chorusrun serves the store)
  int store_port = 0;
  std::string secret;
  int nnodes = 2;
  int node_rank = 0;
  int max_restarts = 1;
  /// How long a launcher may stay silent before the others give up on it (and how long one
  /// keeps trying to reach the store): max(CHORUS_TIMEOUT, 3 s).
  std::chrono::milliseconds silence_limit{std::chrono::seconds(300)};
  std::optional<Deadline> deadline;  ///< --timeout, restarts included
};

/// What a launcher does once a round is over.
struct RoundEnd {
  bool restart = false;
  int exit_code = 0;    ///< when not restarting
  std::string failure;  ///< when restarting: the round's failure ("on node 1, rank 3 ...")
};

/// One launcher's side of the agreement. The job runs in rounds: round K is restart K
/// (CHORUS_RESTART_COUNT=K). Every launcher
/// - joins round K (join_round) and starts its ranks once all `nnodes` launchers have joined;
/// - while its ranks run (PeerNodes): beats its heartbeat every second, reports a failed rank
///   of its own as the round's failure (the first one reported is the round's), and stops its
///   ranks when a rank failed on another node or the job is stopping;
/// - when its ranks ended (end_round), waits for the round's outcome: a failure anywhere
///   (restart if one is left, else every launcher exits non-zero naming the failed rank and
///   its node), or every node's ranks succeeded (exit 0). A node whose ranks finished first
///   thus waits for the others instead of exiting while they may still restart.
/// A signal to any launcher, its --timeout, or a rank it could not start stops the job on
/// every node without a restart. Every wait watches for signals and --timeout, and gives up
/// on a launcher whose heartbeat has not moved for silence_limit ("node 1's chorusrun has not
/// been heard from for 300 s"); a store that goes away (node 0's chorusrun died) stops the
/// others at once. Before exiting every launcher says so in the store, and node 0's (whose
/// process serves the store) waits for all of them, so none loses the store before it knows
/// the outcome. Messages go to stderr as "chorusrun: ...".
class NodeAgreement final : public PeerNodes {
 public:
  NodeAgreement(AgreementSetup setup, SignalPipe& signals);

  /// Connects to the store, retrying while node 0's chorusrun is not serving it yet (up to
  /// silence_limit). Returns nullopt when connected, else the exit status (said why).
  std::optional<int> connect();
  /// Joins round `restart` and waits for every node's launcher to join it (in round 0, also
  /// checks that every node gives the same --max-restarts: else all of them exit 1).
  /// nullopt: start the ranks; else the exit status (a signal, --timeout, a silent node, the
  /// job stopping; said why).
  std::optional<int> join_round(int restart);
  /// After this node's ranks of the current round ended with `result`: the round's outcome.
  RoundEnd end_round(const JobResult& result);

  void report_failure(const std::string& failure) override;
  std::optional<std::string> poll() override;

 private:
  enum class Waited { Done, Signal, Timeout, Stopping, Silent, StoreLost };
  /// Polls every kPeerPoll until `done()` (or, with watch_stop, the job stopping), a signal,
  /// `until` (Timeout), a silent node or a lost store; beats the heartbeat meanwhile.
  Waited wait_until(const std::function<bool()>& done, bool watch_stop,
                    std::optional<Deadline> until);
  /// For a wait that did not end Done: says why, stops the job where it must, leaves.
  int exit_status_after(Waited waited);
  /// Says in the store that this launcher exits; node 0's waits for every other one.
  int leave(int exit_code);
  void stop_job(const std::string& reason);
  void beat();
  std::optional<int> silent_node();
  std::string silence_text(int node) const;
  /// Sleeps up to `pause`; true when a signal chorusrun forwards arrived (kept in signal_).
  bool rest(std::chrono::milliseconds pause);
  /// After round 0's join: a sentence naming a node whose --max-restarts differs from node 0's.
  std::optional<std::string> restarts_mismatch();
  std::string restarts_key(int node) const;
  std::string round_key(const std::string& name) const;

  // Store requests; a failure marks the store lost (lost_) and returns false / 0 / "".
  void lose(const Error& error);
  bool has(const std::string& key);
  std::int64_t count(const std::string& key, std::int64_t delta);
  void put(const std::string& key, const std::string& value);
  std::string fetch(const std::string& key);

  AgreementSetup setup_;
  SignalPipe& signals_;
  std::unique_ptr<Store> store_;
  int round_ = 0;
  int signal_ = 0;         ///< the signal that ended a wait
  int silent_ = -1;        ///< the node whose silence ended a wait
  std::string lost_;       ///< why the store is lost, "" while it answers
  std::string stop_said_;  ///< the "the job is stopping: ..." line already said
  Deadline next_poll_{}, next_beat_{}, next_silence_check_{};
  std::vector<std::int64_t> beats_;  ///< each node's heartbeat as last seen
  std::vector<Deadline> heard_;      ///< when each node's heartbeat last moved
};

/// max(CHORUS_TIMEOUT, 3 s): AgreementSetup::silence_limit.
std::chrono::milliseconds silence_limit_from_env();

}  // namespace chorus::run
