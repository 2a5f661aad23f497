// Many ranks on few cores: a job of 64 processes (32 per core on a 2-core machine) starts,
// runs every collective once per dtype family (mp_worker collectives: all-reduce of every
// dtype and op, all-gather, broadcast, scatter, all-to-all, gather, send/recv, a split, a
// barrier), checks the results and exits, well inside its own time limit.
#include "process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

TEST(ManyRanks, SixtyFourRanksRunTheCollectivesRight) {
  test::ProcessOptions options;
  options.env = {"CHORUS_TIMEOUT=60"};
  options.timeout = 100s;
  const auto start = std::chrono::steady_clock::now();
  test::ProcessResult result =
      test::run_process({CHORUSRUN_PATH, "-n", "64", MP_WORKER_PATH, "collectives"}, options);
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("collectives on 64 ranks: 0 wrong"), std::string::npos)
      << result.out << result.err;
  std::printf("64 ranks: %.1f s from start to exit\n", seconds);
}

}  // namespace
}  // namespace chorus::testing
