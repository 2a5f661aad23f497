// Runs the ranks of one node to completion and decides chorusrun's exit status.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/deadline.hpp"

#include "signals.hpp"
#include "spawn.hpp"

namespace chorus::run {

struct RankLaunch {
  int rank = 0;  ///< global rank, for messages and the "[rank] " prefix
  SpawnRequest request;
};

/// How often the supervisor of a node in a job of several nodes polls PeerNodes.
inline constexpr std::chrono::milliseconds kPeerPoll{200};
/// How long after PeerNodes asked the ranks are stopped: ranks that see a peer's failure
/// themselves report it first (their sentence names the rank they lost).
inline constexpr std::chrono::milliseconds kPeerStopDelay{1000};

/// The launchers of the other nodes, as one node's supervisor sees them (NodeAgreement in
/// agreement.hpp keeps them in the job's store).
class PeerNodes {
 public:
  virtual ~PeerNodes() = default;
  /// Called at once when a rank of this node failed on its own; `failure` says which and how
  /// ("rank 3 (pid 4242) exited with status 1").
  virtual void report_failure(const std::string& failure) = 0;
  /// Called at least every kPeerPoll while the ranks run (it also tells the others this
  /// launcher is alive): a sentence saying why this node's ranks must stop now (a rank failed
  /// on another node, the job is stopping, the store is gone), or nullopt.
  virtual std::optional<std::string> poll() = 0;
};

struct JobPlan {
  std::vector<RankLaunch> ranks;
  bool tag_output = false;
  double timeout_seconds = 0;        ///< --timeout, for the message (0: no limit)
  std::optional<Deadline> deadline;  ///< when --timeout stops the job (restarts included)
  PeerNodes* peers = nullptr;        ///< the other nodes, when they agree on restarts
};

/// Why a run of the ranks ended.
enum class RunEnd {
  Succeeded,   ///< every rank exited 0
  RankFailed,  ///< a rank failed on its own (the one case --max-restarts restarts)
  PeerStop,    ///< PeerNodes::poll asked this node's ranks to stop
  Stopped,     ///< a signal to chorusrun, the timeout, or a rank that could not be started
};

/// How a run of the ranks ended: chorusrun's exit status, why, and (but for Succeeded) a
/// sentence: the failed rank, PeerNodes' reason, or what stopped the job ("got SIGTERM").
struct JobResult {
  int exit_code = 0;
  RunEnd end = RunEnd::Succeeded;
  std::string what;
};

/// Grace between SIGTERM and SIGKILL when stopping ranks.
inline constexpr int kGraceMs = 3000;

/// Starts every rank and supervises them:
/// - a rank that exits non-zero or dies by a signal is reported on stderr
///   ("chorusrun: rank 2 (pid 1234) exited with status 3" / "... was killed by
///   signal 9 (Killed)"), the others get SIGTERM, then SIGKILL after kGraceMs;
///   the result is 1, or 128 + the signal;
/// - SIGINT/SIGTERM/SIGHUP to the launcher are forwarded (a second one sends
///   SIGKILL); the result is 128 + that signal and the run ends Stopped, also when the
///   signal came while the ranks were being stopped for a failure;
/// - past plan.deadline every rank is stopped the same way; the result is 124;
/// - with plan.peers: a failed rank is reported to them at once, and kPeerStopDelay after
///   their poll() gave a reason every rank still running is stopped the same way ("<reason>;
///   stopping this node's 2 rank(s)"); the result is 1;
/// - otherwise, when every rank exited 0, the result is 0.
/// Returns once every rank has been reaped (or stayed unkillable 5 s past SIGKILL).
JobResult run_job(const JobPlan& plan, SignalPipe& signals);

}  // namespace chorus::run
