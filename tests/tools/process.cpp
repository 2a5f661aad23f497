// Child-process runner for the tools' tests (see process.hpp).
#include "process.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#include "bootstrap/socket.hpp"

extern char** environ;

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> child_environment(const std::vector<std::string>& changes) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; *entry; ++entry) {
    std::string text = *entry;
    std::size_t eq = text.find('=');
    vars[text.substr(0, eq)] = eq == std::string::npos ? "" : text.substr(eq + 1);
  }
  for (const std::string& change : changes) {
    std::size_t eq = change.find('=');
    if (eq == std::string::npos)
      vars.erase(change);
    else
      vars[change.substr(0, eq)] = change.substr(eq + 1);
  }
  std::vector<std::string> env;
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

pid_t spawn(std::vector<std::string> argv, std::vector<std::string> env, int out_w, int err_w) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_w, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w, 2);
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = pointers(env);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + " failed");
  return pid;
}

// Reads both pipes until end of file or the deadline; true when both ended.
bool collect(int out_r, int err_r, ProcessResult* result, Clock::time_point deadline) {
  pollfd fds[2] = {{out_r, POLLIN, 0}, {err_r, POLLIN, 0}};
  std::string* sinks[2] = {&result->out, &result->err};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) sinks[i]->append(buffer, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR)) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  return true;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
  auto start = Clock::now();
  pid_t pid = spawn(argv, child_environment(options.env), out[1], err[1]);
  close(out[1]);
  close(err[1]);
  ProcessResult result;
  if (options.on_start) options.on_start(pid);
  if (!collect(out[0], err[0], &result, start + options.timeout)) {
    result.timed_out = true;
    kill(pid, SIGKILL);
  }
  close(out[0]);
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::error_code ignored;
    if (std::filesystem::file_size(path, ignored) > 0 && !ignored) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/chorus-tools-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string free_port_with_next() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    net::Socket first = net::listen_tcp("127.0.0.1", 0);
    std::uint16_t port = net::local_port(first);
    if (port == 65535) continue;
    try {
      net::listen_tcp("127.0.0.1", static_cast<std::uint16_t>(port + 1));
      return std::to_string(port);
    } catch (const chorus::Error&) {
    }
  }
  throw std::runtime_error("no two consecutive free ports");
}

}  // namespace chorus::test
