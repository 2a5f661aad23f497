// One fault-injection trial: `chorusrun -n N fault_worker`, a SIGKILL to one rank
// at a random moment, and the checks of issue 4 item 3 on what follows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::faults {

struct TrialPlan {
  int ranks = 2;
  std::string transport = "shm";  ///< CHORUS_TRANSPORT: shm or tcp
  int victim = 1;
  int delay_ms = 0;        ///< from "every rank is running collectives" to the kill
  std::uint64_t seed = 1;  ///< of the workers' random collectives
};

struct TrialResult {
  std::vector<std::string> problems;   ///< empty when every check passed
  std::vector<double> detection_ms;    ///< per survivor: kill -> its call failed
  std::vector<std::string> sentences;  ///< per survivor: the error it got
  int chorusrun_exit = -1;
};

struct Programs {
  std::string chorusrun;
  std::string worker;
};

/// Runs the trial and checks: each survivor failed with RemoteError (or Timeout)
/// naming the victim within 2 s of the kill; chorusrun exited non-zero naming the
/// victim; no rank process and no new /dev/shm/chorus* segment remains.
TrialResult run_trial(const Programs& programs, const TrialPlan& plan);

}  // namespace chorus::faults
