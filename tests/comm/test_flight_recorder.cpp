// The flight recorder: the ring itself, the dump files (after a timeout and on
// SIGUSR1), and the timeout that names the rank that never arrived.
#include "comm/flight_recorder.hpp"
#include "comm/flight_recorder_dump.hpp"
#include "float_call.hpp"
#include "scoped_env.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;
using detail::FlightRecorder;
using detail::OpDescription;
using detail::OpState;
namespace fs = std::filesystem;

/// A fresh directory for dumps, named by CHORUS_TRACE_DIR while it lives.
class TraceDir {
 public:
  TraceDir() {
    char pattern[] = "/tmp/chorus-trace-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
    ::setenv("CHORUS_TRACE_DIR", path_.c_str(), 1);
  }
  ~TraceDir() {
    ::unsetenv("CHORUS_TRACE_DIR");
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  /// The dumps written so far, by file name.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path_ + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  /// Waits until `n` dumps exist (the SIGUSR1 dump is asynchronous).
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) const {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      std::size_t json = 0;
      for (const auto& name : files()) json += name.ends_with(".json");
      if (json >= n) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

 private:
  std::string path_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FlightRecorder, KeepsTheNewestOperationsInIssueOrder) {
  FlightRecorder recorder(4, {"job", 0, "world", 0, 2});
  auto t = Clock::now();
  std::vector<FlightRecorder::RecordId> ids;
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    ids.push_back(recorder.issued(OpDescription{float_call(Collective::AllReduce, seq)}, t));
  }
  recorder.started(ids[0], t);  // overwritten: ignored
  recorder.started(ids[4], t);
  recorder.finished(ids[4], Status::Success, "", t + 1ms);
  recorder.started(ids[5], t);
  recorder.finished(ids[5], Status::Timeout, std::string(1000, 'x'), t + 2ms);
  detail::TraceSnapshot s = recorder.snapshot(t + 3ms);
  ASSERT_EQ(s.entries.size(), 4u);
  EXPECT_EQ(s.total, 6u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(s.entries[i].op.fingerprint.seq, i + 3);
  EXPECT_EQ(s.entries[0].state, OpState::Issued);
  EXPECT_EQ(s.entries[2].state, OpState::Completed);
  EXPECT_EQ(s.entries[3].state, OpState::Failed);
  EXPECT_EQ(std::string(s.entries[3].error.data()).size(), s.entries[3].error.size() - 1);
}

// A capacity that is not a power of two takes the other slot arithmetic: the same ring.
TEST(FlightRecorder, AnyCapacityKeepsItsNewestOperations) {
  for (std::size_t capacity : {1u, 3u, 5u, 8u}) {
    FlightRecorder recorder(capacity, {"job", 0, "world", 0, 2});
    const auto t = Clock::now();
    std::vector<FlightRecorder::RecordId> ids;
    for (std::uint64_t seq = 1; seq <= 11; ++seq) {
      ids.push_back(recorder.issued(OpDescription{float_call(Collective::AllReduce, seq)}, t));
      recorder.started(ids.back(), t);
    }
    recorder.finished(ids[0], Status::Timeout, "overwritten", t);  // ignored
    recorder.finished(ids.back(), Status::Success, "", t + 1ms);
    detail::TraceSnapshot s = recorder.snapshot(t + 2ms);
    ASSERT_EQ(s.entries.size(), capacity);
    for (std::size_t i = 0; i < capacity; ++i) {
      EXPECT_EQ(s.entries[i].op.fingerprint.seq, 11 - capacity + 1 + i) << "capacity " << capacity;
      EXPECT_EQ(s.entries[i].state, i + 1 == capacity ? OpState::Completed : OpState::Started);
    }
  }
}

TEST(FlightRecorder, ZeroCapacityRecordsNothing) {
  FlightRecorder recorder(0, {"job", 0, "world", 0, 1});
  EXPECT_FALSE(recorder.enabled());
  EXPECT_EQ(recorder.issued(OpDescription{float_call(Collective::Barrier, 1)}, Clock::now()), 0u);
  EXPECT_TRUE(recorder.snapshot(Clock::now()).entries.empty());
}

TEST(FlightRecorder, JsonNamesEveryField) {
  FlightRecorder recorder(8, {"abc123", 3, "world.split1.color0", 1, 2});
  auto t = Clock::now();
  auto id = recorder.issued(OpDescription{float_call(Collective::Broadcast, 7)}, t);
  static constexpr std::string_view kAlgorithm = "binomial";
  recorder.started(id, t);
  recorder.note_algorithm(&kAlgorithm);
  recorder.finished(id, Status::Mismatch, "rank 1 is in \"x\"\n", t);
  const std::string json = detail::trace_json(recorder.snapshot(t), "mismatch");
  for (const char* part :
       {"\"job\": \"abc123\"", "\"world_rank\": 3", "\"comm\": \"world.split1.color0\"",
        "\"comm_rank\": 1", "\"comm_size\": 2", "\"reason\": \"mismatch\"", "\"op\": \"broadcast\"",
        "\"seq\": 7", "\"count\": 4", "\"dtype\": \"float32\"", "\"root\": 0",
        "\"algorithm\": \"binomial\"", "\"state\": \"failed\"", "\"status\": \"mismatch\"",
        "\"error\": \"rank 1 is in \\\"x\\\"\\u000a\"", "\"issued\": 1", "\"total_ops\": 1"}) {
    EXPECT_TRUE(contains(json, part)) << part << "\n" << json;
  }
}

TEST(FlightRecorder, NamesAndIdsAreStable) {
  EXPECT_EQ(detail::trace_comm_name("chorus/g12/world"), "world");
  EXPECT_EQ(detail::trace_comm_name("chorus/g1/world/split2/color3"), "world.split2.color3");
  const std::string a = detail::trace_job_id("secret", 29500, "chorus/g1/world");
  EXPECT_EQ(a, detail::trace_job_id("secret", 29500, "chorus/g1/world"));
  EXPECT_NE(a, detail::trace_job_id("secret", 29501, "chorus/g1/world"));
  EXPECT_NE(a, detail::trace_job_id("secret", 29500, "chorus/g2/world"));
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(detail::trace_path("/d", {"j", 4, "world", 0, 1}), "/d/chorus-trace-j-4-world.json");
}

TEST(FlightRecorder, SettingsAreChecked) {
  EXPECT_EQ(detail::read_trace_settings().buffer, 256u);
  for (const char* bad : {"abc", "-1", "1e3", "999999999", " 5", "+5"}) {
    ScopedEnv env("CHORUS_TRACE_BUFFER", bad);
    EXPECT_THROW(detail::read_trace_settings(), Error) << bad;
  }
  {
    ScopedEnv env("CHORUS_TRACE_SIGNAL", "yes");
    try {
      detail::read_trace_settings();
      ADD_FAILURE() << "CHORUS_TRACE_SIGNAL=yes was accepted";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "CHORUS_TRACE_SIGNAL must be 0 or 1, got 'yes'");
    }
  }
  ScopedEnv env("CHORUS_TRACE_BUFFER", "0");
  EXPECT_EQ(detail::read_trace_settings().buffer, 0u);
}

TEST(FlightRecorder, ZeroBufferWritesNothing) {
  TraceDir dir;
  ScopedEnv env("CHORUS_TRACE_BUFFER", "0");
  ThreadJob job(2, {.transport = "tcp", .timeout = 500ms});
  ASSERT_TRUE(job.ok());
  int value = 1;
  EXPECT_THROW(job.comms()[0].all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum), Error);
  EXPECT_FALSE(dir.wait_for(1, 300ms));  // (no SIGUSR1 handler is installed either)
}

class Recorder : public ::testing::TestWithParam<std::string> {};

// Rank 2 never calls the second collective: ranks 0 and 1 time out naming it, and
// every communicator of the process (three thread-ranks here) writes its record.
TEST_P(Recorder, TimeoutNamesTheMissingRankAndDumps) {
  TraceDir dir;
  ThreadJob job(3, {.transport = GetParam(), .timeout = 1s});
  ASSERT_TRUE(job.ok());
  std::atomic<int> failed{0}, timeouts{0};
  std::vector<std::string> messages(3);
  job.run([&](Communicator& c) {
    int value = c.rank();
    c.barrier();
    if (c.rank() == 2) {
      while (failed.load() < 2) std::this_thread::sleep_for(10ms);
      return;
    }
    try {
      c.all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum);
      ADD_FAILURE() << "rank " << c.rank() << ": the all-reduce succeeded";
    } catch (const Error& e) {
      // The first to time out aborts; the other learns it from the ABORT frame.
      EXPECT_TRUE(e.status() == Status::Timeout || e.status() == Status::RemoteError) << e.what();
      if (e.status() == Status::Timeout) ++timeouts;
      messages[c.rank()] = e.what();
    }
    ++failed;
  });
  EXPECT_GE(timeouts.load(), 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(messages[r], "allreduce #2 (count 1, int32, sum) timed out"))
        << messages[r];
    EXPECT_TRUE(contains(messages[r], ": rank 2 never reached it (rank 2 ")) << messages[r];
  }
  ASSERT_TRUE(dir.wait_for(3, 2s));
  const std::vector<std::string> files = dir.files();
  ASSERT_EQ(files.size(), 3u);
  const std::string rank0 = dir.read(files[0]), rank2 = dir.read(files[2]);
  EXPECT_TRUE(files[0].starts_with("chorus-trace-") && files[0].ends_with("-0-world.json"))
      << files[0];
  EXPECT_TRUE(contains(rank0, "\"op\": \"barrier\", \"seq\": 1")) << rank0;
  EXPECT_TRUE(contains(rank0, "\"op\": \"allreduce\", \"seq\": 2")) << rank0;
  EXPECT_TRUE(contains(rank0, "\"state\": \"failed\"")) << rank0;
  EXPECT_TRUE(contains(rank2, "\"state\": \"completed\"")) << rank2;
  EXPECT_FALSE(contains(rank2, "allreduce")) << rank2;
}

TEST_P(Recorder, SigusrOneDumpsEveryCommunicator) {
  TraceDir dir;
  ThreadJob job(2, {.transport = GetParam(), .timeout = 10s});
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    double x = 1;
    c.all_reduce(&x, &x, 1, DataType::Float64, ReduceOp::Max);
    EXPECT_EQ(x, 1.0);
  });
  std::raise(SIGUSR1);
  ASSERT_TRUE(dir.wait_for(2, 5s));
  for (const std::string& name : dir.files()) {
    const std::string text = dir.read(name);
    EXPECT_TRUE(contains(text, "\"reason\": \"SIGUSR1\"")) << text;
    EXPECT_TRUE(contains(text, "\"op\": \"allreduce\"")) << text;
    EXPECT_TRUE(contains(text, "\"state\": \"completed\"")) << text;
  }
}

// A named group's dump is found by its name: the file and the "comm" field carry it.
TEST_P(Recorder, DumpsNameTheGroup) {
  TraceDir dir;
  ThreadJob job(2, {.transport = GetParam(), .timeout = 10s});
  ASSERT_TRUE(job.ok());
  std::vector<Communicator> groups(2);
  job.run([&](Communicator& c) {
    groups[c.rank()] = c.split(0, c.rank(), "dp");
    groups[c.rank()].barrier();
  });
  std::raise(SIGUSR1);
  ASSERT_TRUE(dir.wait_for(4, 5s));
  std::size_t named = 0;
  for (const std::string& name : dir.files()) {
    if (!name.ends_with("world.split1.color0.dp.json")) continue;
    ++named;
    EXPECT_TRUE(contains(dir.read(name), "\"comm\": \"world.split1.color0.dp\"")) << name;
  }
  EXPECT_EQ(named, 2u);
}

INSTANTIATE_TEST_SUITE_P(Transports, Recorder, ::testing::Values("auto", "tcp"));

}  // namespace
}  // namespace chorus::testing
