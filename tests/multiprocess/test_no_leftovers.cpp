// Jobs stopped at random moments leave no shared memory behind: chorusrun jobs of
// 4 to 16 ranks that make and destroy communicators all along (mp_worker churn) are
// killed during start-up or mid-run, by SIGKILL or SIGTERM to chorusrun or SIGKILL to
// one rank; afterwards /dev/shm holds no "chorus" entry that was not there before.
// The seed is printed; CHORUS_TEST_SEED replays one.
#include "process.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> chorus_entries() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename();
    if (name.find("chorus") != std::string::npos) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// Entries of `now` that `before` lacks.
std::vector<std::string> added(const std::vector<std::string>& before,
                               const std::vector<std::string>& now) {
  std::vector<std::string> extra;
  std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                      std::back_inserter(extra));
  return extra;
}

/// The launcher's children (its ranks), from /proc.
std::vector<pid_t> children_of(pid_t pid) {
  const std::string path =
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  std::ifstream in(path);
  std::vector<pid_t> children;
  for (pid_t child; in >> child;) children.push_back(child);
  return children;
}

enum class Stop { KillLauncher, TermLauncher, KillOneRank };

const char* describe(Stop stop) {
  switch (stop) {
    case Stop::KillLauncher:
      return "SIGKILL to chorusrun";
    case Stop::TermLauncher:
      return "SIGTERM to chorusrun";
    case Stop::KillOneRank:
      return "SIGKILL to one rank";
  }
  return "?";
}

void stop_job(pid_t launcher, Stop stop, std::mt19937& random) {
  if (stop == Stop::KillOneRank) {
    std::vector<pid_t> ranks = children_of(launcher);
    if (!ranks.empty()) {
      ::kill(ranks[std::uniform_int_distribution<std::size_t>(0, ranks.size() - 1)(random)],
             SIGKILL);
      return;
    }  // none started yet (or no /proc children file): stop the launcher instead
  }
  ::kill(launcher, stop == Stop::TermLauncher ? SIGTERM : SIGKILL);
}

/// Leftovers disappear at once or never (nobody unlinks after a kill); a short grace
/// covers a rank that was still unwinding when the launcher's pipes closed.
std::vector<std::string> leftovers_after(const std::vector<std::string>& before) {
  std::vector<std::string> extra = added(before, chorus_entries());
  for (int i = 0; i < 20 && !extra.empty(); ++i) {
    std::this_thread::sleep_for(50ms);
    extra = added(before, chorus_entries());
  }
  return extra;
}

TEST(NoLeftovers, JobsKilledAtRandomMomentsLeaveDevShmAsItWas) {
  const char* seed_text = std::getenv("CHORUS_TEST_SEED");
  const unsigned seed = seed_text ? static_cast<unsigned>(std::strtoul(seed_text, nullptr, 10))
                                  : std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 random(seed);
  const std::vector<std::string> before = chorus_entries();
  const int sizes[] = {4, 8, 16};
  const Stop stops[] = {Stop::KillLauncher, Stop::TermLauncher, Stop::KillOneRank};
  for (int trial = 0; trial < 12; ++trial) {
    const int n = sizes[trial % 3];
    const Stop stop = stops[(trial / 3) % 3];
    // Up to 1.2 s: start-up of 16 oversubscribed ranks takes about that, churn longer.
    const auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<int>(0, trial < 6 ? 400 : 1200)(random));
    test::ProcessOptions options;
    options.env = {"CHORUS_TRANSPORT=auto", "CHORUS_TIMEOUT=20"};
    options.timeout = 30s;
    options.on_start = [&](pid_t launcher) {
      std::this_thread::sleep_for(delay);
      stop_job(launcher, stop, random);
    };
    test::ProcessResult result = test::run_process(
        {CHORUSRUN_PATH, "-n", std::to_string(n), MP_WORKER_PATH, "churn"}, options);
    const std::vector<std::string> extra = leftovers_after(before);
    EXPECT_TRUE(extra.empty()) << n << " ranks, " << describe(stop) << " after " << delay.count()
                               << " ms (exit " << result.exit_code << ", signal " << result.signal
                               << "): " << extra.size() << " new entries in /dev/shm, first "
                               << extra.front();
    for (const std::string& name : extra) std::filesystem::remove("/dev/shm/" + name);
  }
}

}  // namespace
}  // namespace chorus::testing
