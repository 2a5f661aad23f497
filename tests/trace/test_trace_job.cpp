// End to end: chorusrun -n 3 of a worker whose rank 2 skips a collective, or issues it
// after the others' timeout. The others time out naming rank 2, write their flight
// records, and chorus-trace (run on the dump directory) blames rank 2: it never reached
// the all-reduce, or it issued the barrier past the others' timeout.
#include "process.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TraceJob : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceJob, ChorusTraceNamesTheRankThatNeverArrived) {
  test::TempDir dir;
  test::ProcessOptions options;
  options.env = {"CHORUS_TRANSPORT=" + GetParam(), "CHORUS_TIMEOUT=1",
                 "CHORUS_TRACE_DIR=" + dir.path()};
  options.timeout = 30s;
  test::ProcessResult job =
      test::run_process({CHORUSRUN_PATH, "-n", "3", TRACE_WORKER_PATH, "2"}, options);
  ASSERT_FALSE(job.timed_out) << job.out << job.err;
  EXPECT_NE(job.exit_code, 0) << job.out << job.err;
  EXPECT_TRUE(contains(job.err, "allreduce #3 (count 1, int32, sum) timed out")) << job.err;
  EXPECT_TRUE(contains(job.err, "rank 2 never reached it")) << job.err;
  EXPECT_TRUE(
      contains(job.err, "flight recorder of communicator world (timeout): wrote " + dir.path()))
      << job.err;

  int dumps = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (!entry.path().filename().string().starts_with("chorus-trace-")) continue;
    ++dumps;
    // Every operation of the worker is a collective: each entry names its algorithm.
    std::ifstream in(entry.path());
    const std::string dump((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(contains(dump, "\"op\": \"allreduce\"")) << dump;
    EXPECT_FALSE(contains(dump, "\"algorithm\": \"\"")) << dump;
  }
  EXPECT_GE(dumps, 2);

  test::ProcessResult report =
      test::run_process({PYTHON3_PATH, CHORUS_TRACE_PATH, "--dir", dir.path()});
  EXPECT_EQ(report.exit_code, 0) << report.out << report.err;
  EXPECT_TRUE(
      contains(report.out, "communicator world: 3 ranks, dumps from ranks 0-1; none from rank 2"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "rank 2 never reached allreduce #3 (count 1, int32, sum)"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "ranks 0-1 wait in allreduce #3 (count 1, int32, sum)"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "for rank 2")) << report.out;
}

// Rank 2 sleeps 2.5 s before the second barrier; the others give up after 1 s and abort, and
// rank 2's barrier then fails at once. Every rank has the barrier in its record, so only the
// issue times show who held the job up.
TEST_P(TraceJob, ChorusTraceNamesTheRankThatArrivedAfterTheTimeout) {
  test::TempDir dir;
  test::ProcessOptions options;
  options.env = {"CHORUS_TRANSPORT=" + GetParam(), "CHORUS_TIMEOUT=1",
                 "CHORUS_TRACE_DIR=" + dir.path()};
  options.timeout = 30s;
  test::ProcessResult job = test::run_process(
      {CHORUSRUN_PATH, "-n", "3", TRACE_WORKER_PATH, "2", "late", "2.5"}, options);
  ASSERT_FALSE(job.timed_out) << job.out << job.err;
  EXPECT_NE(job.exit_code, 0) << job.out << job.err;
  EXPECT_TRUE(contains(job.err, "barrier #2 timed out")) << job.err;

  test::ProcessResult report =
      test::run_process({PYTHON3_PATH, CHORUS_TRACE_PATH, "--dir", dir.path()});
  EXPECT_EQ(report.exit_code, 0) << report.out << report.err;
  EXPECT_TRUE(contains(report.out, "communicator world: 3 ranks, dumps from ranks 0-2"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "rank 2 issued barrier #2 ")) << report.out;
  // Past the timeout where the sentences give it (tcp), else after the failed waits (the
  // host arena's sentence names no duration).
  EXPECT_TRUE(contains(report.out, " after ranks 0-1, past their 1.0 s timeout") ||
              contains(report.out, " after ranks 0-1, after their wait for it had already failed"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "ranks 0-1 wait in barrier #2")) << report.out;
  EXPECT_TRUE(contains(report.out, "for rank 2")) << report.out;
  EXPECT_FALSE(contains(report.out, "none completed it")) << report.out;
}

INSTANTIATE_TEST_SUITE_P(Transports, TraceJob, ::testing::Values("auto", "tcp"));

}  // namespace
}  // namespace chorus::testing
