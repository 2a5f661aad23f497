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
#include <vector>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TraceJob : public ::testing::TestWithParam<std::string> {};

/// `chorusrun -n 3 trace_worker <worker_args>` on the test's transport, with a 1 s timeout
/// and the dumps in `dir`; fails the test if the job hung.
test::ProcessResult run_trace_job(const test::TempDir& dir,
                                  const std::vector<std::string>& worker_args) {
  test::ProcessOptions options;
  options.env = {"CHORUS_TRANSPORT=" + TraceJob::GetParam(), "CHORUS_TIMEOUT=1",
                 "CHORUS_TRACE_DIR=" + dir.path()};
  options.timeout = 30s;
  std::vector<std::string> command = {CHORUSRUN_PATH, "-n", "3", TRACE_WORKER_PATH};
  command.insert(command.end(), worker_args.begin(), worker_args.end());
  test::ProcessResult job = test::run_process(command, options);
  EXPECT_FALSE(job.timed_out) << job.out << job.err;
  EXPECT_NE(job.exit_code, 0) << job.out << job.err;
  return job;
}

/// chorus-trace's report on the dumps in `dir`.
test::ProcessResult trace_report(const test::TempDir& dir) {
  test::ProcessResult report =
      test::run_process({PYTHON3_PATH, CHORUS_TRACE_PATH, "--dir", dir.path()});
  EXPECT_EQ(report.exit_code, 0) << report.out << report.err;
  return report;
}

TEST_P(TraceJob, ChorusTraceNamesTheRankThatNeverArrived) {
  test::TempDir dir;
  test::ProcessResult job = run_trace_job(dir, {"2"});
  ASSERT_FALSE(job.timed_out);
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

  test::ProcessResult report = trace_report(dir);
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
  test::ProcessResult job = run_trace_job(dir, {"2", "late", "2.5"});
  ASSERT_FALSE(job.timed_out);
  EXPECT_TRUE(contains(job.err, "barrier #2 timed out")) << job.err;

  test::ProcessResult report = trace_report(dir);
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
