// chorusrun as a black box: programs that need no Chorus (sh, true, sleep)
// started through it, checking exit statuses, messages, environment, output
// tagging, timeouts and the stopping of the surviving ranks.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/cpus.hpp"
#include "process.hpp"

namespace chorus::test {
namespace {

using namespace std::chrono_literals;

ProcessResult chorusrun(std::vector<std::string> args, ProcessOptions options = {}) {
  args.insert(args.begin(), CHORUSRUN_PATH);
  if (options.timeout == ProcessOptions{}.timeout) options.timeout = 20s;
  return run_process(args, options);
}

ProcessOptions with_env(std::vector<std::string> env) {
  ProcessOptions options;
  options.env = std::move(env);
  return options;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// True when `pid` is gone or a zombie (dead, waiting for its new parent to reap it).
bool is_dead(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("State:", 0) == 0) return line.find('Z') != std::string::npos;
  }
  return true;
}

/// Death by PDEATHSIG or SIGKILL is delivered asynchronously: give it a moment.
bool becomes_dead(pid_t pid) {
  for (int i = 0; i < 300 && !is_dead(pid); ++i) std::this_thread::sleep_for(10ms);
  return is_dead(pid);
}

std::vector<pid_t> read_pids(const TempDir& dir, int ranks) {
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r)
    pids.push_back(std::stoi(read_file(dir.path() + "/pid." + std::to_string(r))));
  return pids;
}

// A rank script that records its pid, then becomes `sleep 30` (same pid).
std::string record_pid_then_sleep(const TempDir& dir) {
  return "echo $$ > " + dir.path() + "/pid.$RANK; exec sleep 30";
}

TEST(Chorusrun, AllRanksSucceed) {
  ProcessResult result = chorusrun({"-n", "3", "/bin/true"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
}

TEST(Chorusrun, FailingRankIsNamedAndOthersStop) {
  ProcessResult result =
      chorusrun({"-n", "3", "sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 30"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("rank 1 (pid "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("exited with status 3"), std::string::npos) << result.err;
  EXPECT_LT(result.seconds, 10);
}

TEST(Chorusrun, KilledRankNamesSignalAndSurvivorsAreStopped) {
  TempDir dir;
  // Rank 2 kills itself once the others have recorded their pids.
  std::string wait_others = "while [ ! -s " + dir.path() + "/pid.0 ] || [ ! -s " + dir.path() +
                            "/pid.1 ]; do sleep 0.05; done; ";
  std::string script =
      "if [ \"$RANK\" = 2 ]; then " + wait_others + "kill -9 $$; fi; " + record_pid_then_sleep(dir);
  ProcessResult result = chorusrun({"-n", "3", "sh", "-c", script});
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_NE(result.err.find("rank 2 (pid "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("killed by signal 9 (Killed)"), std::string::npos) << result.err;
  EXPECT_LT(result.seconds, 10);
  for (pid_t pid : read_pids(dir, 2)) EXPECT_TRUE(becomes_dead(pid)) << "rank pid " << pid;
}

TEST(Chorusrun, RankIgnoringSigtermIsKilledAfterGrace) {
  std::string script = "trap '' TERM; if [ \"$RANK\" = 0 ]; then sleep 0.5; exit 5; fi; sleep 30";
  ProcessResult result = chorusrun({"-n", "2", "sh", "-c", script});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("rank 0 (pid "), std::string::npos) << result.err;
  EXPECT_GE(result.seconds, 2.5);
  EXPECT_LT(result.seconds, 10);
}

TEST(Chorusrun, TagOutputPrefixesLinesPerStream) {
  ProcessResult result = chorusrun({"--tag-output", "-n", "2", "sh", "-c",
                                    "echo out $RANK; echo err $RANK >&2; printf tail$RANK"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (std::string rank : {"0", "1"}) {
    EXPECT_NE(result.out.find("[" + rank + "] out " + rank + "\n"), std::string::npos)
        << result.out;
    EXPECT_NE(result.out.find("[" + rank + "] tail" + rank + "\n"), std::string::npos)
        << result.out;
    EXPECT_NE(result.err.find("[" + rank + "] err " + rank + "\n"), std::string::npos)
        << result.err;
  }
  EXPECT_EQ(result.out.find("err"), std::string::npos);
}

// Parses the "[r] RANK WORLD_SIZE ..." lines of EnvironmentPerRank's script.
std::vector<std::vector<std::string>> tagged_words(const std::string& out) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream stream(out);
  std::string line;
  while (std::getline(stream, line)) {
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string word; words >> word;) fields.push_back(word);
    lines.push_back(fields);
  }
  return lines;
}

constexpr const char* kPrintEnv =
    "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT "
    "$CHORUS_STORE_EXTERNAL $CHORUS_AUTH_TOKEN $CHORUS_STORE_ADDR $CHORUS_STORE_PORT";

// The per-rank words of a kPrintEnv job expected to succeed with `ranks` ranks here;
// lines of another length are reported and padded, so that tests may index any field.
std::vector<std::vector<std::string>> env_lines(const ProcessResult& result, std::size_t ranks) {
  EXPECT_EQ(result.exit_code, 0) << result.err;
  auto lines = tagged_words(result.out);
  EXPECT_EQ(lines.size(), ranks) << result.out;
  for (auto& words : lines) {
    EXPECT_EQ(words.size(), 12u) << result.out;
    words.resize(12);
  }
  return lines;
}

TEST(Chorusrun, EnvironmentPerRank) {
  ProcessResult result = chorusrun({"--tag-output", "-n", "3", "sh", "-c", kPrintEnv},
                                   with_env({"CHORUS_AUTH_TOKEN"}));
  auto lines = env_lines(result, 3);
  std::set<std::string> ranks;
  for (const auto& f : lines) {
    EXPECT_EQ(f[0], "[" + f[1] + "]");
    ranks.insert(f[1]);
    EXPECT_EQ(f[2], "3");
    EXPECT_EQ(f[3], f[1]);  // one node: local rank = rank
    EXPECT_EQ(f[4], "3");
    EXPECT_EQ(f[5], "0");
    EXPECT_EQ(f[6], "127.0.0.1");
    EXPECT_GT(std::stoi(f[7]), 0);
    EXPECT_EQ(f[7], lines[0][7]);
    EXPECT_EQ(f[8], "1");
    EXPECT_EQ(f[9].size(), 64u);
    EXPECT_EQ(f[9], lines[0][9]);  // one secret per job
    EXPECT_EQ(f[10], "127.0.0.1");
    EXPECT_GT(std::stoi(f[11]), 0);
    EXPECT_NE(f[11], f[7]);  // the store leaves MASTER_PORT to the program
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
}

// --bind-to core: each rank may run on one CPU, the launcher's allowed CPUs in order,
// wrapping around; without it every rank may run on all of them.
TEST(Chorusrun, BindToCorePinsEachRankToOneCpu) {
  const char* kAllowed = "grep Cpus_allowed_list /proc/self/status | cut -f2";
  std::string all = run_process({"/bin/sh", "-c", kAllowed}).out;
  ProcessResult bound =
      chorusrun({"--tag-output", "--bind-to", "core", "-n", "3", "sh", "-c", kAllowed});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  auto lines = tagged_words(bound.out);
  ASSERT_EQ(lines.size(), 3u) << bound.out;
  const std::vector<int> cpus = allowed_cpus();  // tested against the mask in test_cpus.cpp
  ASSERT_FALSE(cpus.empty());
  for (const auto& f : lines) {
    ASSERT_EQ(f.size(), 2u) << bound.out;
    const int rank = std::stoi(f[0].substr(1, f[0].size() - 2));
    EXPECT_EQ(f[1], std::to_string(cpus[static_cast<std::size_t>(rank) % cpus.size()]))
        << bound.out;
  }
  ProcessResult unbound = chorusrun({"--tag-output", "-n", "2", "sh", "-c", kAllowed});
  ASSERT_EQ(unbound.exit_code, 0) << unbound.err;
  for (const auto& f : tagged_words(unbound.out)) EXPECT_EQ(f.back() + "\n", all) << unbound.out;
}

TEST(Chorusrun, GivenTokenAndSecondNodeNumbering) {
  ProcessResult result =
      chorusrun({"--tag-output", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                 "--master-port", "29500", "-n", "2", "sh", "-c", kPrintEnv},
                with_env({"CHORUS_AUTH_TOKEN=s3cret"}));
  for (const auto& f : env_lines(result, 2)) {
    EXPECT_TRUE(f[1] == "2" || f[1] == "3") << f[1];
    EXPECT_EQ(f[2], "4");
    EXPECT_EQ(std::stoi(f[1]) - 2, std::stoi(f[3]));
    EXPECT_EQ(f[5], "1");
    EXPECT_EQ(f[7], "29500");
    EXPECT_EQ(f[9], "s3cret");
    EXPECT_EQ(f[10], "127.0.0.1");
    EXPECT_EQ(f[11], "29501");  // --master-port + 1 without --store-port
  }
}

// torchrun's spellings reach the ranks' environment like chorusrun's own.
TEST(Chorusrun, TorchrunSpellings) {
  ProcessResult result =
      chorusrun({"--tag-output", "--nproc_per_node", "2", "--nnodes=1", "--node_rank", "0",
                 "--master_addr", "localhost", "--master_port=29577", "sh", "-c", kPrintEnv},
                with_env({"CHORUS_AUTH_TOKEN"}));
  for (const auto& f : env_lines(result, 2)) {
    EXPECT_EQ(f[2], "2");
    EXPECT_EQ(f[5], "0");
    EXPECT_EQ(f[6], "localhost");
    EXPECT_EQ(f[7], "29577");
    EXPECT_EQ(f[10], "localhost");
    EXPECT_NE(f[11], "29577");
  }
}

TEST(Chorusrun, Version) {
  ProcessResult result = chorusrun({"--version"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, std::string("chorusrun ") + CHORUS_VERSION + "\n");
}

// A .py program runs under $CHORUS_PYTHON, by default the interpreter of the torch backend.
TEST(Chorusrun, PythonScriptRunsUnderPython) {
  TempDir dir;
  const std::string script = dir.path() + "/show.py";
  std::ofstream(script) << "import os, sys\nprint(sys.executable, os.environ['RANK'], "
                           "*sys.argv[1:])\n";
  ProcessResult result =
      chorusrun({"--tag-output", "-n", "2", script, "a", "b"}, with_env({"CHORUS_PYTHON"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (std::string rank : {"0", "1"}) {
    EXPECT_NE(result.out.find("[" + rank + "] " + CHORUS_DEFAULT_PYTHON + " " + rank + " a b\n"),
              std::string::npos)
        << result.out;
  }
  ProcessResult chosen = chorusrun({"-n", "1", script, "c"}, with_env({"CHORUS_PYTHON=echo"}));
  EXPECT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_EQ(chosen.out, script + " c\n");
}

TEST(Chorusrun, PythonScriptOrInterpreterMissing) {
  TempDir dir;
  ProcessResult missing = chorusrun({"-n", "2", dir.path() + "/absent.py"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("cannot find the Python script '" + dir.path() + "/absent.py'"),
            std::string::npos)
      << missing.err;
  const std::string script = dir.path() + "/present.py";
  std::ofstream(script) << "print('never')\n";
  ProcessResult no_python =
      chorusrun({"-n", "2", script}, with_env({"CHORUS_PYTHON=no-such-python-chorus"}));
  EXPECT_EQ(no_python.exit_code, 127);
  EXPECT_NE(no_python.err.find("cannot find 'no-such-python-chorus' in PATH (the Python "
                               "interpreter for " +
                               script + "; set CHORUS_PYTHON"),
            std::string::npos)
      << no_python.err;
}

TEST(Chorusrun, TimeoutStopsTheJob) {
  ProcessResult result = chorusrun({"--timeout", "0.5", "-n", "2", "sleep", "30"});
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_NE(result.err.find("timeout"), std::string::npos) << result.err;
  EXPECT_LT(result.seconds, 5);
}

// --max-restarts: a rank that fails in the first two runs restarts the whole job, which the
// ranks see in CHORUS_RESTART_COUNT; the third run succeeds, so the job does.
TEST(Chorusrun, MaxRestartsRestartsTheWholeJob) {
  TempDir dir;
  const std::string script = "echo $CHORUS_RESTART_COUNT/$TORCHELASTIC_MAX_RESTARTS >> " +
                             dir.path() + "/runs.$RANK; " +
                             "if [ \"$RANK\" = 1 ] && [ \"$CHORUS_RESTART_COUNT\" -lt 2 ]; then "
                             "exit 7; fi";
  ProcessResult result = chorusrun({"--max-restarts", "3", "-n", "2", "sh", "-c", script});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("rank 1 (pid "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("restarting the job (restart 1 of 3)"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("restarting the job (restart 2 of 3)"), std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("restart 3 of 3"), std::string::npos) << result.err;
  EXPECT_EQ(read_file(dir.path() + "/runs.1"), "0/3\n1/3\n2/3\n");
  EXPECT_LT(result.seconds, 20);
}

// Restarts run out: the last failure is the job's exit status. A job without --max-restarts
// is not restarted, and neither is one stopped by the timeout.
TEST(Chorusrun, RestartsRunOutOrDoNotApply) {
  ProcessResult out = chorusrun({"--max-restarts", "1", "-n", "2", "sh", "-c",
                                 "if [ \"$RANK\" = 0 ]; then exit 5; fi; exec sleep 30"});
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_NE(out.err.find("restarting the job (restart 1 of 1)"), std::string::npos) << out.err;
  EXPECT_EQ(out.err.find("restart 2"), std::string::npos) << out.err;
  ProcessResult plain = chorusrun({"-n", "2", "sh", "-c", "exit 5"});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_EQ(plain.err.find("restarting"), std::string::npos) << plain.err;
  ProcessResult timed =
      chorusrun({"--timeout", "0.5", "--max-restarts", "2", "-n", "2", "sleep", "30"});
  EXPECT_EQ(timed.exit_code, 124);
  EXPECT_EQ(timed.err.find("restarting"), std::string::npos) << timed.err;
}

// A signal to chorusrun while it stops the ranks after a failure (rank 0 ignores SIGTERM, so
// the grace period runs) ends the job: no restart.
TEST(Chorusrun, SignalWhileStoppingIsNotRestarted) {
  TempDir dir;
  ProcessOptions options;
  options.on_start = [&](pid_t launcher) {
    ASSERT_TRUE(wait_for_file(dir.path() + "/failing", 10s));
    std::this_thread::sleep_for(500ms);
    kill(launcher, SIGINT);
  };
  const std::string d = dir.path();
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then until [ -e " + d + "/ready ]; do sleep 0.05; done; echo x > " +
      d + "/failing; exit 5; fi; trap '' TERM; echo x > " + d + "/ready; exec sleep 30";
  ProcessResult result = chorusrun({"--max-restarts", "2", "-n", "2", "sh", "-c", script}, options);
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << result.err;
  EXPECT_NE(result.err.find("got SIGINT; killing the ranks"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("restarting"), std::string::npos) << result.err;
  EXPECT_LT(result.seconds, 10);
}

TEST(Chorusrun, SigtermIsForwarded) {
  TempDir dir;
  ProcessOptions options;
  options.on_start = [&](pid_t launcher) {
    ASSERT_TRUE(wait_for_file(dir.path() + "/pid.1", 5s));
    ASSERT_TRUE(wait_for_file(dir.path() + "/pid.0", 5s));
    kill(launcher, SIGTERM);
  };
  ProcessResult result = chorusrun({"-n", "2", "sh", "-c", record_pid_then_sleep(dir)}, options);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_LT(result.seconds, 10);
  for (pid_t pid : read_pids(dir, 2)) EXPECT_TRUE(becomes_dead(pid));
}

TEST(Chorusrun, RanksDieWithTheLauncher) {
  TempDir dir;
  ProcessOptions options;
  options.on_start = [&](pid_t launcher) {
    ASSERT_TRUE(wait_for_file(dir.path() + "/pid.1", 5s));
    ASSERT_TRUE(wait_for_file(dir.path() + "/pid.0", 5s));
    kill(launcher, SIGKILL);
  };
  ProcessResult result = chorusrun({"-n", "2", "sh", "-c", record_pid_then_sleep(dir)}, options);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_LT(result.seconds, 10);  // the pipes closed: no rank outlived the launcher
  for (pid_t pid : read_pids(dir, 2)) EXPECT_TRUE(becomes_dead(pid));
}

TEST(Chorusrun, BadUsageExitsWithTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"-n", "0", "/bin/true"},
      {"-n", "x", "/bin/true"},
      {"-n"},
      {"--frobnicate", "/bin/true"},
      {"--timeout", "-1", "/bin/true"},
      {"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port", "1",
       "/bin/true"},
      {"--nnodes", "2", "/bin/true"},
      {"--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "1", "/bin/true"},
      {"--master_port", "7", "--store-port", "7", "/bin/true"},
  };
  for (const auto& args : cases) {
    ProcessResult result = chorusrun(args, with_env({"CHORUS_AUTH_TOKEN"}));
    EXPECT_EQ(result.exit_code, 2) << testing::PrintToString(args) << result.err;
    EXPECT_NE(result.err.find("chorusrun: "), std::string::npos);
  }
}

TEST(Chorusrun, HelpAndMissingProgram) {
  ProcessResult help = chorusrun({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* text : {"CHORUS_AUTH_TOKEN", "CHORUS_STORE_PORT", "--store-port",
                           "--nproc_per_node", "--version", "CHORUS_PYTHON"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text;
  }
  ProcessResult missing = chorusrun({"-n", "2", "no-such-program-chorus"});
  EXPECT_EQ(missing.exit_code, 127);
}

}  // namespace
}  // namespace chorus::test
