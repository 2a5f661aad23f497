// chorus-perf under chorusrun, end to end: real processes, the store hosted by
// the launcher, every collective checked against its closed form.
#include <gtest/gtest.h>

#include "process.hpp"

namespace chorus::test {
namespace {

using namespace std::chrono_literals;

ProcessResult perf(int ranks, std::vector<std::string> perf_args, std::vector<std::string> env) {
  std::vector<std::string> args = {CHORUSRUN_PATH, "-n", std::to_string(ranks),
                                   "--timeout",    "50", CHORUS_PERF_PATH};
  args.insert(args.end(), perf_args.begin(), perf_args.end());
  ProcessOptions options;
  env.push_back("CHORUS_TIMEOUT=20");  // a hang fails inside the test's time, not at ctest's
  options.env = std::move(env);
  options.timeout = 55s;
  return run_process(args, options);
}

void expect_clean(const ProcessResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_NE(result.out.find("# Out of bounds values : 0 OK"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("# Avg bus bandwidth"), std::string::npos);
  for (const char* name : {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                           "gather", "scatter", "alltoall", "alltoallv", "sendrecv", "barrier"}) {
    EXPECT_NE(result.out.find(std::string("# Collective: ") + name + " "), std::string::npos)
        << name;
  }
}

const std::vector<std::string> kAllCollectives = {"-t", "all", "-b", "8",  "-e", "64K", "-f",
                                                  "8",  "-c",  "1",  "-n", "2",  "-w",  "1"};

TEST(ChorusPerf, AllCollectivesOverTcp) {
  expect_clean(perf(3, kAllCollectives, {"CHORUS_TRANSPORT=tcp"}));
}

TEST(ChorusPerf, AllCollectivesDefaultTransport) {
  expect_clean(perf(3, kAllCollectives, {"CHORUS_TRANSPORT"}));
}

TEST(ChorusPerf, EveryTypeAndOpInPlaceWithRoot) {
  expect_clean(perf(4,
                    {"-t", "all", "-d", "all", "-o", "all", "-z", "-r", "3", "-b", "0", "-e", "1K",
                     "-f", "32", "-n", "1", "-w", "0"},
                    {}));
}

// --shared: every collective on buffers from alloc_shared, checked; all-reduces past one
// arena round run in place in the peers' buffers, and chorus-perf names the algorithm.
TEST(ChorusPerf, SharedBuffers) {
  ProcessResult result = perf(3,
                              {"-t", "all", "-b", "8", "-e", "256K", "-f", "32", "-z", "-c", "1",
                               "-n", "2", "-w", "1", "--shared"},
                              {"CHORUS_TRANSPORT"});
  expect_clean(result);
  EXPECT_NE(result.out.find("shm_window"), std::string::npos) << result.out;
}

// Under srun, before joining, Slurm's SLURM_PROCID says which rank speaks for the job: rank 0
// alone prints the help, and a rank that cannot join names itself.
TEST(ChorusPerf, SlurmRanksKnowWhoTheyAre) {
  const std::vector<std::string> no_launcher = {"RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
  auto run_as = [&](const std::vector<std::string>& slurm, std::vector<std::string> args) {
    ProcessOptions options;
    options.env = no_launcher;
    options.env.insert(options.env.end(), slurm.begin(), slurm.end());
    args.insert(args.begin(), CHORUS_PERF_PATH);
    return run_process(args, options);
  };
  ProcessResult result = run_as({"SLURM_PROCID=1"}, {"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "");
  result = run_as({"SLURM_PROCID=0"}, {"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("usage: chorusrun -n N chorus-perf"), std::string::npos) << result.out;
  result = run_as({"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2"}, {"-b", "8", "-e", "8"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("chorus-perf: rank 1: invalid argument: MASTER_ADDR is not set"),
            std::string::npos)
      << result.err;
}

TEST(ChorusPerf, BadRootIsAUsageError) {
  ProcessResult result = perf(2, {"-r", "2", "-b", "8", "-e", "8"}, {});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("-r 2 is not a rank"), std::string::npos) << result.err;
}

// A range of more sizes than one run takes is refused, by rank 0, with the sentence (the other
// ranks find the same error and leave the word to it).
TEST(ChorusPerf, TooManySizesAreAUsageError) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    ProcessResult result = perf(3, {"-b", "4", "-e", "1M", "-i", "4"}, {});
    EXPECT_NE(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("rank 0 (pid"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("exited with status 2"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("-b 4 -e 1048576 -i 4 gives 262144 sizes (chorus-perf runs at most "
                              "10000): raise -i to at least 105"),
              std::string::npos)
        << result.err;
    EXPECT_EQ(result.out.find("1048576"), std::string::npos) << result.out;
  }
}

}  // namespace
}  // namespace chorus::test
