// Runs a program (chorusrun, chorus-perf) as a child of the test, capturing its
// output and exit status, with a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace chorus::test {

struct ProcessOptions {
  /// "NAME=value" sets, "NAME" unsets a variable of the test's environment.
  std::vector<std::string> env;
  /// The child is killed (SIGKILL) when it runs longer; the result says timed_out.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// Called once the child started, while its output accumulates (e.g. to signal it).
  std::function<void(pid_t)> on_start;
};

struct ProcessResult {
  int exit_code = -1;  ///< -1 when killed by a signal
  int signal = 0;      ///< the signal that killed it, 0 when it exited
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;  ///< wall time from start to exit
};

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// A port P such that P and P + 1 are free on 127.0.0.1 now: node 0's MASTER_PORT and the
/// default port of its chorusrun's store.
std::string free_port_with_next();

/// Waits until `path` exists and is non-empty; false after `timeout`.
bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout);

/// A fresh empty directory under TMPDIR (or /tmp), removed with its files on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace chorus::test
