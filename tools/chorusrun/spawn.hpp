// Starting one rank: fork + execve with the rank's environment, in its own
// process group, killed by the kernel if the launcher dies.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace chorus::run {

/// Everything the child needs, prepared before fork (the child of a
/// multi-threaded process may only make async-signal-safe calls).
struct SpawnRequest {
  std::string path;               ///< resolved executable
  std::vector<std::string> argv;  ///< argv[0] is the program as the user typed it
  std::vector<std::string> env;   ///< the complete environment, "NAME=value"
  bool capture_output = false;    ///< stdout/stderr to pipes (for --tag-output)
  bool inherit_stdin = false;     ///< else stdin is /dev/null
  int cpu = -1;                   ///< the only CPU the child may run on (-1: no binding)
};

struct SpawnedRank {
  pid_t pid = -1;
  int stdout_fd = -1;  ///< read ends when capture_output, else -1
  int stderr_fd = -1;
};

/// Forks and execs. The child: signal dispositions and mask reset, own
/// process group (pgid == pid), PR_SET_PDEATHSIG = SIGKILL, descriptors above 2
/// closed, bound to request.cpu when it is set (a failed binding is not fatal: the
/// rank then runs unbound). When execve fails the child prints why and exits with 127.
/// Throws Error(SystemError) when fork or pipe fails.
SpawnedRank spawn_rank(const SpawnRequest& request);

/// The executable `name` names: itself when it contains '/', else the first
/// match in PATH. Throws Error(InvalidArgument) when there is none.
std::string resolve_program(const std::string& name);

/// What a rank executes for the command line `command` (program and arguments).
struct Program {
  std::string path;               ///< the resolved executable
  std::vector<std::string> argv;  ///< argv[0] as the user typed it
};

/// `command` itself, its program found by resolve_program; or, when the program's
/// name ends in ".py", the Python interpreter ($CHORUS_PYTHON, default
/// CHORUS_DEFAULT_PYTHON, found by resolve_program) running that script.
/// Throws Error(InvalidArgument) naming what cannot be found.
Program resolve_command(const std::vector<std::string>& command);

/// Sends `signal_number` to the process group of a rank (to the rank alone when
/// the group is gone, e.g. the rank left it).
void signal_rank(pid_t pid, int signal_number);

}  // namespace chorus::run
