// Supervision of the ranks of one node (see launcher.hpp).
//
// One thread, one loop: poll(self-pipe of signals + output pipes, <= 1 s), then
// act on signals, reap exited ranks (waitpid WNOHANG on each, so a lost SIGCHLD
// only delays us by one tick), relay output and check the deadlines. Each
// pass does a bounded amount of work and every wait is bounded by a deadline.
#include "launcher.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chorus/error.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "core/deadline.hpp"
#include "output.hpp"

namespace chorus::run {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTick{1000};
constexpr milliseconds kDrain{2000};   // output still arriving after the last rank exited
constexpr milliseconds kGiveUp{5000};  // ranks that survive SIGKILL (stuck in the kernel)

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool alive = false;
};

void say(const std::string& line) { write_all(2, "chorusrun: " + line + "\n"); }

std::string describe_exit(const Child& child, int status) {
  std::string who =
      "rank " + std::to_string(child.rank) + " (pid " + std::to_string(child.pid) + ")";
  if (WIFSIGNALED(status)) {
    int number = WTERMSIG(status);
    const char* name = strsignal(number);
    return who + " was killed by signal " + std::to_string(number) + " (" +
           (name ? name : "unknown") + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

std::string signal_name(int number) {
  const char* abbreviation = sigabbrev_np(number);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(number);
}

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", seconds);
  return buffer;
}

class Supervisor {
 public:
  Supervisor(const JobPlan& plan, SignalPipe& signals) : plan_(plan), signals_(signals) {}

  JobResult run() {
    job_deadline_ = plan_.deadline;
    start_all();
    while (!finished()) {
      wait_for_events();
      handle_signals();
      reap();
      relay_.read_available();
      check_deadlines();
    }
    relay_.close_all();
    return {exit_code_, rank_failed_};
  }

 private:
  void start_all() {
    for (const RankLaunch& launch : plan_.ranks) {
      try {
        SpawnedRank spawned = spawn_rank(launch.request);
        children_.push_back(Child{launch.rank, spawned.pid, true});
        if (spawned.stdout_fd >= 0) relay_.add(spawned.stdout_fd, launch.rank, 1);
        if (spawned.stderr_fd >= 0) relay_.add(spawned.stderr_fd, launch.rank, 2);
      } catch (const Error& error) {
        say("cannot start rank " + std::to_string(launch.rank) + ": " + error.what());
        exit_code_ = 1;
        stop(SIGTERM);
        return;
      }
    }
  }

  int alive_count() const {
    return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                          [](const Child& child) { return child.alive; }));
  }

  bool finished() {
    if (alive_count() > 0) {
      if (give_up_deadline_ && expired(*give_up_deadline_)) {
        say(std::to_string(alive_count()) + " rank(s) survived SIGKILL; leaving them");
        return true;
      }
      return false;
    }
    return !relay_.has_open_streams() || (drain_deadline_ && expired(*drain_deadline_));
  }

  void wait_for_events() {
    std::vector<pollfd> fds{pollfd{signals_.fd(), POLLIN, 0}};
    relay_.append_pollfds(&fds);
    milliseconds timeout = kTick;
    for (const auto& deadline :
         {job_deadline_, kill_deadline_, give_up_deadline_, drain_deadline_}) {
      if (deadline) timeout = std::min(timeout, milliseconds(remaining_ms(*deadline)));
    }
    poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  }

  void handle_signals() {
    for (int number : signals_.drain()) {
      if (!is_forwarded_signal(number)) continue;  // SIGCHLD: reap() runs next anyway
      if (stopping_) {
        say("got " + signal_name(number) + " again; killing the ranks");
        kill_all(SIGKILL);
        kill_deadline_.reset();
        give_up_deadline_ = deadline_after(kGiveUp);
        continue;
      }
      say("got " + signal_name(number) + "; forwarding it to the ranks");
      exit_code_ = 128 + number;
      stop(number);
    }
  }

  void reap() {
    for (Child& child : children_) {
      if (!child.alive) continue;
      int status = 0;
      pid_t result = waitpid(child.pid, &status, WNOHANG);
      if (result == 0 || (result < 0 && errno == EINTR)) continue;
      child.alive = false;
      if (result == child.pid) on_exit(child, status);
    }
    if (alive_count() == 0 && !drain_deadline_) drain_deadline_ = deadline_after(kDrain);
  }

  void on_exit(const Child& child, int status) {
    bool success = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (success || stopping_) return;  // ranks we stopped are not news
    say(describe_exit(child, status));
    exit_code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    rank_failed_ = true;
    stop(SIGTERM);
  }

  void check_deadlines() {
    if (job_deadline_ && expired(*job_deadline_) && !stopping_) {
      say("timeout: the job ran longer than " + seconds_text(plan_.timeout_seconds) +
          " s; stopping " + std::to_string(alive_count()) + " rank(s)");
      exit_code_ = 124;
      stop(SIGTERM);
    }
    if (kill_deadline_ && expired(*kill_deadline_)) {
      kill_all(SIGKILL);
      kill_deadline_.reset();
      give_up_deadline_ = deadline_after(kGiveUp);
    }
  }

  // Sends `number` to every live rank and arms SIGKILL after the grace period.
  void stop(int number) {
    stopping_ = true;
    kill_all(number);
    kill_deadline_ = deadline_after(milliseconds(kGraceMs));
  }

  void kill_all(int number) {
    for (const Child& child : children_) {
      if (child.alive) signal_rank(child.pid, number);
    }
  }

  const JobPlan& plan_;
  SignalPipe& signals_;
  LineRelay relay_;
  std::vector<Child> children_;
  std::optional<Deadline> job_deadline_, kill_deadline_, give_up_deadline_, drain_deadline_;
  bool stopping_ = false;
  bool rank_failed_ = false;
  int exit_code_ = 0;
};

}  // namespace

JobResult run_job(const JobPlan& plan, SignalPipe& signals) {
  return Supervisor(plan, signals).run();
}

}  // namespace chorus::run
