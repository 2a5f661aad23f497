// One fault-injection trial (see fault_trial.hpp). chorusrun runs in its own process
// group, so whatever a failed trial leaves behind is killed with the group at the end
// (after the "nothing left behind" check has looked).
#include "fault_trial.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cctype>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace chorus::faults {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kRemoteError = 4;  // chorus::Status values, as the worker writes them
constexpr int kTimeout = 5;
constexpr double kDetectLimitMs = 2000;

long long monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> shm_segments() {
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ignored)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("chorus")) names.insert(name);
  }
  return names;
}

/// Starts chorusrun in a new process group, output into `dir`/out and `dir`/err.
pid_t start_job(const Programs& programs, const TrialPlan& plan, const fs::path& dir) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  int out = open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(out, 1);
  dup2(err, 2);
  setenv("CHORUS_TRANSPORT", plan.transport.c_str(), 1);
  setenv("CHORUS_TIMEOUT", "10", 1);
  setenv("CHORUS_FAULT_DIR", dir.c_str(), 1);
  setenv("CHORUS_FAULT_SEED", std::to_string(plan.seed).c_str(), 1);
  setenv("CHORUS_FAULT_MAX_SECONDS", "30", 1);
  std::string n = std::to_string(plan.ranks);
  execl(programs.chorusrun.c_str(), programs.chorusrun.c_str(), "-n", n.c_str(),
        programs.worker.c_str(), static_cast<char*>(nullptr));
  _exit(127);
}

/// Waits for chorusrun to exit; its exit code, or -1 when it outlived `limit`.
int wait_job(pid_t job, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(job, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(5ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The pids the ranks announced, once all of them did; empty if the job ended or took too long.
std::vector<pid_t> wait_for_ranks(pid_t job, const TrialPlan& plan, const fs::path& dir) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pid_t> pids;
    for (int r = 0; r < plan.ranks; ++r) {
      std::ifstream in(dir / ("rank" + std::to_string(r) + ".pid"));
      pid_t pid = 0;
      if (in >> pid) pids.push_back(pid);
    }
    if (static_cast<int>(pids.size()) == plan.ranks) return pids;
    if (waitpid(job, nullptr, WNOHANG) != 0) return {};
    std::this_thread::sleep_for(5ms);
  }
  return {};
}

/// Whether `sentence` names "rank <rank>" as a whole number ("rank 1" is not in "rank 12").
bool names_rank(const std::string& sentence, int rank) {
  const std::string word = "rank " + std::to_string(rank);
  for (auto at = sentence.find(word); at != std::string::npos; at = sentence.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if (end == sentence.size() || !std::isdigit(static_cast<unsigned char>(sentence[end]))) {
      return true;
    }
  }
  return false;
}

/// Checks what survivor `rank` wrote; adds its detection time or a problem.
void check_survivor(int rank, const TrialPlan& plan, const fs::path& dir, long long killed_ns,
                    TrialResult* result) {
  std::ifstream in(dir / ("rank" + std::to_string(rank) + ".result"));
  int status = 0;
  long long detected_ns = 0;
  std::string sentence;
  const std::string who = "rank " + std::to_string(rank) + ": ";
  if (!(in >> status >> detected_ns)) {
    result->problems.push_back(who + "no failure recorded (killed before its call returned?)");
    return;
  }
  std::getline(in >> std::ws, sentence);
  result->sentences.push_back("rank " + std::to_string(rank) + ": " + sentence);
  double ms = (detected_ns - killed_ns) / 1e6;
  if (status != kRemoteError && status != kTimeout) {
    result->problems.push_back(who + "failed with status " + std::to_string(status) + ": " +
                               sentence);
  } else if (!names_rank(sentence, plan.victim)) {
    result->problems.push_back(who + "the error does not name the victim: " + sentence);
  } else if (ms > kDetectLimitMs || ms < 0) {
    result->problems.push_back(who + "detected after " + std::to_string(ms) + " ms: " + sentence);
  }
  if (status == kRemoteError || status == kTimeout) result->detection_ms.push_back(ms);
}

void check_leftovers(const std::vector<pid_t>& pids, const std::set<std::string>& shm_before,
                     TrialResult* result) {
  for (pid_t pid : pids) {
    if (kill(pid, 0) == 0)
      result->problems.push_back("rank pid " + std::to_string(pid) + " is still alive");
  }
  std::set<std::string> left;
  for (int attempt = 0; attempt < 20; ++attempt) {  // segments of a dying job vanish shortly
    left.clear();
    for (const std::string& name : shm_segments()) {
      if (!shm_before.count(name)) left.insert(name);
    }
    if (left.empty()) return;
    std::this_thread::sleep_for(50ms);
  }
  for (const std::string& name : left) result->problems.push_back("left behind /dev/shm/" + name);
}

void check_launcher(int exit_code, pid_t victim_pid, const TrialPlan& plan, const fs::path& dir,
                    TrialResult* result) {
  result->chorusrun_exit = exit_code;
  if (exit_code == -1) {
    result->problems.push_back("chorusrun did not exit within 20 s of the kill");
  } else if (exit_code == 0) {
    result->problems.push_back("chorusrun exited 0 although a rank was killed");
  }
  std::string expected = "rank " + std::to_string(plan.victim) + " (pid " +
                         std::to_string(victim_pid) + ") was killed by signal 9";
  if (read_text(dir / "err").find(expected) == std::string::npos) {
    result->problems.push_back("chorusrun did not report \"" + expected + "\"");
  }
}

}  // namespace

TrialResult run_trial(const Programs& programs, const TrialPlan& plan) {
  TrialResult result;
  char dir_template[] = "/tmp/chorus-faults-XXXXXX";
  fs::path dir = mkdtemp(dir_template);
  const std::set<std::string> shm_before = shm_segments();
  pid_t job = start_job(programs, plan, dir);
  std::vector<pid_t> pids = wait_for_ranks(job, plan, dir);
  if (pids.empty()) {
    result.problems.push_back("the ranks never all started: " + read_text(dir / "err"));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(plan.delay_ms));
    long long killed_ns = monotonic_ns();
    kill(pids[plan.victim], SIGKILL);
    int exit_code = wait_job(job, 20s);
    for (int r = 0; r < plan.ranks; ++r) {
      if (r != plan.victim) check_survivor(r, plan, dir, killed_ns, &result);
    }
    check_launcher(exit_code, pids[plan.victim], plan, dir, &result);
    check_leftovers(pids, shm_before, &result);
  }
  kill(-job, SIGKILL);  // whatever a failed trial left in the job's process group
  waitpid(job, nullptr, 0);
  if (result.problems.empty())
    fs::remove_all(dir);
  else
    result.problems.push_back("files kept in " + dir.string());
  return result;
}

}  // namespace chorus::faults
