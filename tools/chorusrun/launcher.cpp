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
      check_peers();
    }
    relay_.close_all();
    return {exit_code_, end_, what_};
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
        const std::string failure =
            "cannot start rank " + std::to_string(launch.rank) + ": " + error.what();
        say(failure);
        end(1, RunEnd::Stopped, failure);
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
    milliseconds timeout = plan_.peers ? kPeerPoll : kTick;
    for (const auto& deadline :
         {job_deadline_, kill_deadline_, give_up_deadline_, drain_deadline_, peer_stop_deadline_}) {
      if (deadline) timeout = std::min(timeout, milliseconds(remaining_ms(*deadline)));
    }
    poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  }

  void handle_signals() {
    for (int number : signals_.drain()) {
      if (!is_forwarded_signal(number)) continue;  // SIGCHLD: reap() runs next anyway
      const bool again = end_ == RunEnd::Stopped;
      end_by_signal(number);
      if (stopping_) {
        say("got " + signal_name(number) + (again ? " again" : "") + "; killing the ranks");
        kill_all(SIGKILL);
        kill_deadline_.reset();
        give_up_deadline_ = deadline_after(kGiveUp);
        continue;
      }
      say("got " + signal_name(number) + "; forwarding it to the ranks");
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
    const std::string failure = describe_exit(child, status);
    say(failure);
    if (plan_.peers) plan_.peers->report_failure(failure);
    end(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1, RunEnd::RankFailed, failure);
    stop(SIGTERM);
  }

  void check_deadlines() {
    if (job_deadline_ && expired(*job_deadline_)) {
      job_deadline_.reset();  // acted on once: the loop's poll() must not spin on it
      if (!stopping_) on_timeout();
    }
    if (kill_deadline_ && expired(*kill_deadline_)) {
      kill_all(SIGKILL);
      kill_deadline_.reset();
      give_up_deadline_ = deadline_after(kGiveUp);
    }
  }

  void on_timeout() {
    const std::string limit = seconds_text(plan_.timeout_seconds);
    say("timeout: the job ran longer than " + limit + " s; stopping " +
        std::to_string(alive_count()) + " rank(s)");
    end(124, RunEnd::Stopped, std::string("ran longer than --timeout ") + limit + " s");
    stop(SIGTERM);
  }

  // While ranks run, asks the other nodes whether to stop them (PeerNodes::poll), and stops
  // them kPeerStopDelay after the first reason.
  void check_peers() {
    if (!plan_.peers) return;
    std::optional<std::string> reason = plan_.peers->poll();
    if (reason && !peer_reason_) {
      peer_reason_ = std::move(reason);
      peer_stop_deadline_ = deadline_after(kPeerStopDelay);
    }
    if (!peer_stop_deadline_ || !expired(*peer_stop_deadline_)) return;
    peer_stop_deadline_.reset();
    if (stopping_ || alive_count() == 0) return;
    say(*peer_reason_ + "; stopping this node's " + std::to_string(alive_count()) + " rank(s)");
    end(1, RunEnd::PeerStop, *peer_reason_);
    stop(SIGTERM);
  }

  // Records how the run ends (the first cause only: what follows is its consequence).
  void end(int exit_code, RunEnd why, const std::string& what) {
    if (end_ != RunEnd::Succeeded) return;
    exit_code_ = exit_code;
    end_ = why;
    what_ = what;
  }

  // A signal to chorusrun ends the run as Stopped (never restarted), even one that arrives
  // while the ranks are being stopped for another reason; the first signal is the one kept.
  void end_by_signal(int number) {
    if (end_ == RunEnd::Stopped) return;
    exit_code_ = 128 + number;
    end_ = RunEnd::Stopped;
    what_ = std::string("got ") + signal_name(number);
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
  std::optional<Deadline> job_deadline_, kill_deadline_, give_up_deadline_, drain_deadline_,
      peer_stop_deadline_;
  std::optional<std::string> peer_reason_;  ///< why the other nodes want the ranks stopped
  bool stopping_ = false;
  RunEnd end_ = RunEnd::Succeeded;
  std::string what_;
  int exit_code_ = 0;
};

}  // namespace

JobResult run_job(const JobPlan& plan, SignalPipe& signals) {
  return Supervisor(plan, signals).run();
}

}  // namespace chorus::run
