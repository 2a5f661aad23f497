// chorusrun --nnodes 2 --max-restarts on loopback: the two launchers of one job agree on
// restarts through node 0's store. The ranks are shell scripts that need no Chorus; they find
// each other through files in the test's directory ($D).
#include <gtest/gtest.h>

#include <array>
#include <csignal>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "process.hpp"

namespace chorus::test {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Shell functions for the ranks: `wait_files PREFIX N` waits up to 15 s until $D holds N
// files whose names start with PREFIX; `pid_then_sleep` records the rank's pid and sleeps.
constexpr const char* kHelpers = R"sh(
files() { ls "$D" | grep -c "^$1"; }
wait_files() {
  n=0
  until [ "$(files "$1")" -ge "$2" ]; do
    n=$((n + 1)); [ $n -le 150 ] || return 1; sleep 0.1
  done
}
pid_then_sleep() { echo $$ > "$D/pid.$RANK"; exec sleep 30; }
k=$CHORUS_RESTART_COUNT
echo "$k" >> "$D/runs.$RANK"
)sh";

std::vector<std::string> max_restarts(int n) { return {"--max-restarts", std::to_string(n)}; }

struct TwoNodes {
  explicit TwoNodes(std::string text) : script(std::move(text)) {}
  std::string script;  ///< every rank's shell script, after kHelpers
  std::array<std::vector<std::string>, 2> options{max_restarts(2), max_restarts(2)};
  std::vector<std::string> env;
  std::array<std::function<void(pid_t)>, 2> on_start;  ///< acts on node i's launcher
};

// Runs node 0 and node 1 of one job side by side (2 ranks each) and returns their results.
std::array<ProcessResult, 2> run_two_nodes(const TempDir& dir, const TwoNodes& job) {
  const std::string port = free_port_with_next();
  std::array<ProcessResult, 2> results;
  auto node = [&](int index) {
    ProcessOptions options;
    options.env = job.env;
    options.env.push_back("CHORUS_AUTH_TOKEN=two-node-restarts");
    options.env.push_back("D=" + dir.path());
    options.timeout = 60s;
    options.on_start = job.on_start[static_cast<std::size_t>(index)];
    std::vector<std::string> args{CHORUSRUN_PATH,
                                  "--nnodes",
                                  "2",
                                  "--node-rank",
                                  std::to_string(index),
                                  "--master-addr",
                                  "127.0.0.1",
                                  "--master-port",
                                  port,
                                  "-n",
                                  "2"};
    const auto& extra = job.options[static_cast<std::size_t>(index)];
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"sh", "-c", kHelpers + job.script});
    results[static_cast<std::size_t>(index)] = run_process(args, options);
  };
  std::thread other([&] { node(1); });
  node(0);
  other.join();
  return results;
}

// Waits for every rank's pid file, then signals the launcher.
std::function<void(pid_t)> signal_when_running(const TempDir& dir, int signal_number) {
  return [&dir, signal_number](pid_t launcher) {
    for (int rank = 0; rank < 4; ++rank) {
      ASSERT_TRUE(wait_for_file(dir.path() + "/pid." + std::to_string(rank), 20s)) << rank;
    }
    kill(launcher, signal_number);
  };
}

// Node 0's ranks finish at once; then rank 3 on node 1 fails. Node 0's launcher waits for the
// outcome, and both nodes restart together: in restart 1 every rank waits for all four.
TEST(ChorusrunNodes, NodeWhoseRanksFinishedRestartsWithTheOthers) {
  TempDir dir;
  const auto results = run_two_nodes(dir, TwoNodes(R"(
if [ "$k" = 0 ]; then
  if [ "$RANK" = 3 ]; then wait_files done. 2; sleep 0.5; exit 7; fi
  [ "$RANK" -ge 2 ] || touch "$D/done.$RANK"
  exit 0
fi
touch "$D/up.$k.$RANK"
wait_files "up.$k." 4 || exit 9
)"));
  for (const ProcessResult& node : results) {
    EXPECT_EQ(node.exit_code, 0) << node.err;
    EXPECT_TRUE(has(node.err,
                    "restarting the job (restart 1 of 2) on all 2 nodes: on node 1, "
                    "rank 3 (pid "))
        << node.err;
    EXPECT_TRUE(has(node.err, "exited with status 7")) << node.err;
    EXPECT_FALSE(has(node.err, "restart 2 of 2")) << node.err;
    EXPECT_LT(node.seconds, 30);
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(read_file(dir.path() + "/runs." + std::to_string(rank)), "0\n1\n") << rank;
  }
}

// Rank 3 fails in every run: once the restarts are used up, both launchers exit non-zero
// naming the failed rank and its node, node 0's although its own ranks all succeeded.
TEST(ChorusrunNodes, RestartsRunOutOnEveryNode) {
  TempDir dir;
  TwoNodes job(R"(
if [ "$RANK" = 3 ]; then wait_files "done.$k." 2; sleep 0.3; exit 7; fi
[ "$RANK" -ge 2 ] || touch "$D/done.$k.$RANK"
)");
  job.options[0] = max_restarts(1);
  job.options[1] = max_restarts(1);
  const auto results = run_two_nodes(dir, job);
  for (const ProcessResult& node : results) {
    EXPECT_EQ(node.exit_code, 1) << node.err;
    EXPECT_TRUE(has(node.err, "restarting the job (restart 1 of 1) on all 2 nodes")) << node.err;
    EXPECT_TRUE(has(node.err, "on node 1, rank 3 (pid ")) << node.err;
    EXPECT_TRUE(has(node.err, "exited with status 7; no restart left (--max-restarts 1)"))
        << node.err;
    EXPECT_LT(node.seconds, 30);
  }
  EXPECT_EQ(read_file(dir.path() + "/runs.0"), "0\n1\n");
}

// A signal to one launcher stops the job on both nodes, without a restart.
TEST(ChorusrunNodes, SignalToOneLauncherStopsEveryNode) {
  TempDir dir;
  TwoNodes job("pid_then_sleep\n");
  job.on_start[1] = signal_when_running(dir, SIGTERM);
  const auto results = run_two_nodes(dir, job);
  EXPECT_EQ(results[1].exit_code, 128 + SIGTERM) << results[1].err;
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(has(results[0].err, "the job is stopping: node 1's chorusrun got SIGTERM"))
      << results[0].err;
  for (const ProcessResult& node : results) {
    EXPECT_FALSE(has(node.err, "restarting")) << node.err;
    EXPECT_LT(node.seconds, 20);
  }
}

// Node 1's launcher dies while node 0's ranks have finished: node 0's gives up on it after
// CHORUS_TIMEOUT (here 3 s) without a heartbeat instead of waiting for an outcome forever.
TEST(ChorusrunNodes, SilentLauncherIsGivenUpOn) {
  TempDir dir;
  TwoNodes job(R"(
if [ "$RANK" -ge 2 ]; then pid_then_sleep; fi
echo $$ > "$D/pid.$RANK"
)");
  job.env = {"CHORUS_TIMEOUT=3"};
  job.on_start[1] = signal_when_running(dir, SIGKILL);
  const auto results = run_two_nodes(dir, job);
  EXPECT_EQ(results[1].signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(has(results[0].err, "node 1's chorusrun has not been heard from for 3 s"))
      << results[0].err;
  EXPECT_LT(results[0].seconds, 20);
}

// Node 0's launcher, which serves the store, dies: node 1's stops its ranks and exits at once.
TEST(ChorusrunNodes, LostStoreStopsTheOtherNodes) {
  TempDir dir;
  TwoNodes job("pid_then_sleep\n");
  job.on_start[0] = signal_when_running(dir, SIGKILL);
  const auto results = run_two_nodes(dir, job);
  EXPECT_EQ(results[0].signal, SIGKILL);
  EXPECT_EQ(results[1].exit_code, 1) << results[1].err;
  EXPECT_TRUE(has(results[1].err, "lost the job's store at 127.0.0.1:")) << results[1].err;
  EXPECT_TRUE(has(results[1].err, "(node 0's chorusrun exited or died)")) << results[1].err;
  EXPECT_FALSE(has(results[1].err, "restarting")) << results[1].err;
  EXPECT_LT(results[1].seconds, 15);
}

// Nodes that give different --max-restarts are refused before any rank starts.
TEST(ChorusrunNodes, DifferentMaxRestartsAreRefused) {
  TempDir dir;
  TwoNodes job("exit 0\n");
  job.options[1] = max_restarts(1);
  const auto results = run_two_nodes(dir, job);
  const std::string sentence =
      "node 1's --max-restarts 1 differs from node 0's 2 (every node must give the same)";
  for (const ProcessResult& node : results) {
    EXPECT_EQ(node.exit_code, 1) << node.err;
    EXPECT_TRUE(has(node.err, sentence)) << node.err;
  }
  EXPECT_EQ(read_file(dir.path() + "/runs.0"), "");
}

}  // namespace
}  // namespace chorus::test
