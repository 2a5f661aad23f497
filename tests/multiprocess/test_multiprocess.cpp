// Real processes: every collective through chorusrun on both transports (one node,
// and two chorusrun nodes on loopback), and a rank killed with SIGKILL in the middle
// of a collective.
#include "bootstrap/store.hpp"
#include "process.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

extern char** environ;

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

class ChorusrunJob : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ChorusrunJob, EveryCollectiveIsRight) {
  auto [transport, n] = GetParam();
  test::ProcessOptions options;
  options.env = {"CHORUS_TRANSPORT=" + transport, "CHORUS_TIMEOUT=60"};
  options.timeout = 90s;
  test::ProcessResult result = test::run_process(
      {CHORUSRUN_PATH, "-n", std::to_string(n), MP_WORKER_PATH, "collectives"}, options);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("0 wrong"), std::string::npos) << result.out << result.err;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ChorusrunJob,
                         ::testing::Combine(::testing::Values("auto", "tcp"),
                                            ::testing::Values(1, 2, 3, 5)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

/// A 2-rank TCP job of the collectives worker with CHORUS_SOCKET_IFNAME=`ifname`.
test::ProcessResult run_with_ifname(const std::string& ifname) {
  test::ProcessOptions options;
  options.env = {"CHORUS_TRANSPORT=tcp", "CHORUS_TIMEOUT=60", "CHORUS_SOCKET_IFNAME=" + ifname};
  options.timeout = 90s;
  return test::run_process({CHORUSRUN_PATH, "-n", "2", MP_WORKER_PATH, "collectives"}, options);
}

// CHORUS_SOCKET_IFNAME takes an interface name, as NCCL_SOCKET_IFNAME does: each rank
// advertises lo's address for its TCP links.
TEST(SocketIfname, TcpJobOverANamedInterfaceCompletes) {
  test::ProcessResult result = run_with_ifname("lo");
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("0 wrong"), std::string::npos) << result.out << result.err;
}

// A value that fits no interface of the host fails the job at start, naming it. (Each rank
// checks it before reaching the store, Init.UnknownSocketInterfaceFailsAtStart; chorusrun
// stops the other rank as soon as one fails, so that rank may never print its sentence.)
TEST(SocketIfname, UnknownInterfaceFailsTheJobAtStart) {
  test::ProcessResult result = run_with_ifname("nosuch0");
  EXPECT_NE(result.exit_code, 0) << result.out << result.err;
  EXPECT_LT(result.seconds, 20.0) << result.err;
  const std::string sentence = "CHORUS_SOCKET_IFNAME=\"nosuch0\" selects no interface";
  EXPECT_NE(result.err.find(sentence), std::string::npos) << result.err;
}

// Two chorusrun processes (--nnodes 2, node ranks 0 and 1) make one job of 2 x 2 ranks:
// node 1's ranks join node 0's store through CHORUS_STORE_ADDR and CHORUS_STORE_PORT.
TEST(ChorusrunNodes, TwoNodesOnLoopback) {
  const std::string port = test::free_port_with_next();
  test::ProcessOptions options;
  options.env = {"CHORUS_AUTH_TOKEN=two-node-secret", "CHORUS_TIMEOUT=60"};
  options.timeout = 90s;
  auto node = [&](const char* node_rank) {
    return test::run_process(
        {CHORUSRUN_PATH, "--nnodes", "2", "--node-rank", node_rank, "--master-addr", "127.0.0.1",
         "--master-port", port, "-n", "2", MP_WORKER_PATH, "collectives"},
        options);
  };
  test::ProcessResult second;
  std::thread other([&] { second = node("1"); });
  test::ProcessResult first = node("0");
  other.join();
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(first.out.find("collectives on 4 ranks: 0 wrong"), std::string::npos)
      << first.out << first.err;
}

/// Starts one worker process with the launcher variables of `rank`.
pid_t spawn_rank(int rank, int n, const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(n));
  env.push_back("LOCAL_RANK=" + std::to_string(rank));
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp,
      argv = {const_cast<char*>(MP_WORKER_PATH), const_cast<char*>("kill"), nullptr};
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execve(MP_WORKER_PATH, argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

/// Reaps every child as soon as it exits (as a launcher would), until `deadline`;
/// SIGKILLs the ones still running then. Returns the wait statuses (-1: killed at the deadline).
std::vector<int> reap_all(const std::vector<pid_t>& pids,
                          std::chrono::steady_clock::time_point deadline) {
  std::vector<int> statuses(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  std::size_t remaining = pids.size();
  while (remaining > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!done[i] && waitpid(pids[i], &statuses[i], WNOHANG) == pids[i])
        done[i] = true, --remaining;
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) kill(pids[i], SIGKILL), waitpid(pids[i], nullptr, 0), statuses[i] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  return statuses;
}

class KilledRank : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(KilledRank, SurvivorsSeeRemoteErrorWithinTwoSeconds) {
  auto [transport, n] = GetParam();
  // Trial 2's victim dies right after init: over TCP no link to it is open yet, so the
  // survivors learn of its death when they open one (refused) or from a peer's ABORT.
  for (int trial = 0; trial < 3; ++trial) {
    StoreServer server("127.0.0.1", 0, "kill-test-secret");
    test::TempDir dir;
    const int victim = (trial * 2 + 1) % n;
    std::vector<std::string> env = {
        "MASTER_ADDR=127.0.0.1",
        "MASTER_PORT=" + std::to_string(server.port()),
        "CHORUS_STORE_EXTERNAL=1",
        "CHORUS_AUTH_TOKEN=kill-test-secret",
        "CHORUS_TRANSPORT=" + transport,
        "CHORUS_TIMEOUT=20",
        "CHORUS_TEST_VICTIM=" + std::to_string(victim),
        "CHORUS_TEST_KILL_AFTER=" + std::to_string(trial == 2 ? -1 : 3 + trial * 2),
        "CHORUS_TEST_KILL_FILE=" + dir.path() + "/killed"};
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) pids.push_back(spawn_rank(r, n, env));
    std::vector<int> statuses = reap_all(pids, std::chrono::steady_clock::now() + 40s);
    for (int r = 0; r < n; ++r) {
      int status = statuses[r];
      if (r == victim) {
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
            << "victim status " << status;
      } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "rank " << r << " of " << n << " (victim " << victim << ") status " << status;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, KilledRank,
                         ::testing::Combine(::testing::Values("auto", "tcp"),
                                            ::testing::Values(2, 3, 5)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace chorus::testing
