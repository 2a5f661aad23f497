// Runs the ranks of one node to completion and decides chorusrun's exit status.
#pragma once

#include <optional>
#include <vector>

#include "core/deadline.hpp"

#include "signals.hpp"
#include "spawn.hpp"

namespace chorus::run {

struct RankLaunch {
  int rank = 0;  ///< global rank, for messages and the "[rank] " prefix
  SpawnRequest request;
};

struct JobPlan {
  std::vector<RankLaunch> ranks;
  bool tag_output = false;
  double timeout_seconds = 0;        ///< --timeout, for the message (0: no limit)
  std::optional<Deadline> deadline;  ///< when --timeout stops the job (restarts included)
};

/// How a run of the ranks ended: chorusrun's exit status, and whether it ended because a rank
/// failed on its own (the one case --max-restarts restarts: not a signal to chorusrun, not
/// the timeout, not a rank that could not be started).
struct JobResult {
  int exit_code = 0;
  bool rank_failed = false;
};

/// Grace between SIGTERM and SIGKILL when stopping ranks.
inline constexpr int kGraceMs = 3000;

/// Starts every rank and supervises them:
/// - a rank that exits non-zero or dies by a signal is reported on stderr
///   ("chorusrun: rank 2 (pid 1234) exited with status 3" / "... was killed by
///   signal 9 (Killed)"), the others get SIGTERM, then SIGKILL after kGraceMs;
///   the result is 1, or 128 + the signal;
/// - SIGINT/SIGTERM/SIGHUP to the launcher are forwarded (a second one sends
///   SIGKILL); the result is 128 + that signal;
/// - past plan.deadline every rank is stopped the same way; the result is 124;
/// - otherwise, when every rank exited 0, the result is 0.
/// Returns once every rank has been reaped (or stayed unkillable 5 s past SIGKILL).
JobResult run_job(const JobPlan& plan, SignalPipe& signals);

}  // namespace chorus::run
