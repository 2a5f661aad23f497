// What CHORUS_DEBUG=INFO says about the cost model on a real communicator: that the tuning
// file was read and what it set (once per process), and, the first time a collective of a
// size class runs, the algorithm chosen with every candidate's modelled time.
#include "core/log.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(TuningLog, TheFileAndEachChoiceAreExplainedAtInfo) {
  char path[] = "/tmp/chorus-tuning-log-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << "shm.alpha_us 4  # measured\ngamma_ns_per_byte 0.5  # assumed\n";
  }
  ::setenv("CHORUS_TUNING_FILE", path, 1);
  set_log_level(LogLevel::Info);
  ::testing::internal::CaptureStderr();
  {
    ThreadJob job(3, {.transport = "tcp", .timeout = 20s});
    if (job.ok()) {
      job.run([](Communicator& c) {
        for (int i = 0; i < 3; ++i) {  // the same size class again: logged once
          double v = c.rank();
          c.all_reduce(&v, &v, 1, DataType::Float64, ReduceOp::Sum);
          EXPECT_EQ(v, 3.0);
        }
      });
    }
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_log_level(LogLevel::Warn);
  ::unsetenv("CHORUS_TUNING_FILE");
  std::remove(path);

  const std::string read = std::string("INFO CHORUS_TUNING_FILE ") + path +
                           " read: shm.alpha_us 4 (measured), gamma_ns_per_byte 0.5 (assumed); "
                           "built-in defaults for shm.beta_ns_per_byte, tcp.alpha_us, "
                           "tcp.beta_ns_per_byte, arena.alpha_us, arena.beta_ns_per_byte, "
                           "tcp.links_per_host\n";
  EXPECT_EQ(occurrences(log, read), 1u) << log;
  // Every rank logs its first all-reduce of 8 bytes once, with the candidates' times.
  const std::string choice = "INFO allreduce of 8 bytes (bucket < 16) uses algorithm ";
  EXPECT_EQ(occurrences(log, choice), 3u) << log;
  const std::size_t at = log.find(choice);
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  const std::string chosen =
      line.substr(choice.size(), line.find(' ', choice.size()) - choice.size());
  EXPECT_NE(line.find(" (modelled: " + chosen + " "), std::string::npos) << line;
  EXPECT_NE(line.find(" us"), std::string::npos) << line;
  EXPECT_NE(line.find(", ring "), std::string::npos) << line;
}

}  // namespace
}  // namespace chorus::testing
