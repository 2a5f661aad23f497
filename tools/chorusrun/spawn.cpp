// fork/exec of ranks (see spawn.hpp).
#include "spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chorus/error.hpp>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace chorus::run {
namespace {

constexpr int kResetSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};

[[noreturn]] void throw_system(const std::string& what) {
  throw Error(Status::SystemError, what + " failed: " + std::strerror(errno));
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (const std::string& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Closes every descriptor above 2. close_range needs Linux 5.9; older kernels
// take the loop up to the descriptor limit computed before fork.
void close_descriptors_from_3(int max_fd) {
  if (close_range(3, ~0U, 0) == 0) return;
  for (int fd = 3; fd < max_fd; ++fd) close(fd);
}

// Only async-signal-safe calls from here to execve.
[[noreturn]] void exec_child(const SpawnRequest& request, char* const* argv, char* const* envp,
                             pid_t parent, int devnull, int out_w, int err_w, int max_fd) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  for (int signal_number : kResetSignals) sigaction(signal_number, &action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the launcher died before prctl took effect
  if (request.cpu >= 0) {
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(request.cpu, &only);
    sched_setaffinity(0, sizeof only, &only);
  }
  if (!request.inherit_stdin) dup2(devnull, 0);
  if (out_w >= 0) dup2(out_w, 1);
  if (err_w >= 0) dup2(err_w, 2);
  close_descriptors_from_3(max_fd);
  execve(request.path.c_str(), argv, envp);
  const char* reason = strerrorname_np(errno);  // a table lookup, unlike strerror's gettext
  if (reason == nullptr) reason = "exec failed";
  const char* parts[] = {"chorusrun: cannot execute ", request.path.c_str(), ": ", reason, "\n"};
  for (const char* part : parts) {
    [[maybe_unused]] ssize_t ignored = write(2, part, strlen(part));
  }
  _exit(127);
}

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
  void open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw_system("pipe2");
    read_fd = fds[0];
    write_fd = fds[1];
  }
};

int descriptor_limit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 65536;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
}

}  // namespace

SpawnedRank spawn_rank(const SpawnRequest& request) {
  std::vector<char*> argv = pointers(request.argv);
  std::vector<char*> envp = pointers(request.env);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw_system("open /dev/null");
  Pipe out, err;
  if (request.capture_output) {
    out.open();
    err.open();
  }
  int max_fd = descriptor_limit();
  // Signals stay blocked across fork so that no handler of the launcher runs in
  // the child (it would write to the launcher's self-pipe).
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    exec_child(request, argv.data(), envp.data(), parent, devnull, out.write_fd, err.write_fd,
               max_fd);
  }
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  close(devnull);
  for (int fd : {out.write_fd, err.write_fd}) {
    if (fd >= 0) close(fd);
  }
  if (pid < 0) {
    for (int fd : {out.read_fd, err.read_fd}) {
      if (fd >= 0) close(fd);
    }
    errno = fork_errno;
    throw_system("fork");
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  return SpawnedRank{pid, out.read_fd, err.read_fd};
}

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return name;
    throw Error(Status::InvalidArgument, "'" + name + "' is not an executable file");
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = end > start ? path.substr(start, end - start) : ".";
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  throw Error(Status::InvalidArgument, "cannot find '" + name + "' in PATH");
}

Program resolve_command(const std::vector<std::string>& command) {
  const std::string& name = command.front();
  if (!name.ends_with(".py")) return Program{resolve_program(name), command};
  struct stat info {};
  if (stat(name.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw Error(Status::InvalidArgument, "cannot find the Python script '" + name + "'");
  }
  const char* chosen = std::getenv("CHORUS_PYTHON");
  const std::string python = chosen && *chosen ? chosen : CHORUS_DEFAULT_PYTHON;
  Program program;
  try {
    program.path = resolve_program(python);
  } catch (const Error& error) {
    throw Error(Status::InvalidArgument, std::string(error.what()) +
                                             " (the Python interpreter for " + name +
                                             "; set CHORUS_PYTHON to choose one)");
  }
  program.argv = command;
  program.argv.insert(program.argv.begin(), python);
  return program;
}

void signal_rank(pid_t pid, int signal_number) {
  if (kill(-pid, signal_number) != 0 && errno == ESRCH) kill(pid, signal_number);
}

}  // namespace chorus::run
