// The timeout sentence: its parts, and one shape on every transport (TCP links,
// shared-memory links, the host arena) when a rank never makes a call.
#include "float_call.hpp"
#include "scoped_env.hpp"
#include "thread_ranks.hpp"
#include "transport/timeout_sentence.hpp"

#include <gtest/gtest.h>

#include <regex.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <tuple>

namespace chorus::testing {
namespace {

/// Whether `text` matches the POSIX extended regular expression `pattern` (POSIX regex.h:
/// std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers).
bool matches(const std::string& text, const char* pattern) {
  regex_t compiled;
  if (regcomp(&compiled, pattern, REG_EXTENDED | REG_NOSUB) != 0) return false;
  const bool found = regexec(&compiled, text.c_str(), 0, nullptr, 0) == 0;
  regfree(&compiled);
  return found;
}

using namespace std::chrono_literals;
using transport::arrival_clause;
using transport::timeout_sentence;

TEST(TimeoutSentence, NamesTheRanksThatNeverArrived) {
  std::vector<std::optional<Fingerprint>> seen(6);
  seen[1] = float_call(Collective::AllReduce, 12);
  seen[2] = float_call(Collective::AllReduce, 13);
  seen[3] = float_call(Collective::Broadcast, 11);
  seen[4] = float_call(Collective::AllReduce, 12);
  EXPECT_EQ(arrival_clause(0, float_call(Collective::AllReduce, 12), seen),
            "ranks 3, 5 never reached it (rank 3 last seen in broadcast #11 (count 4, float32, "
            "root 0); rank 5 not seen in any call yet)");
  seen[3] = seen[5] = float_call(Collective::AllReduce, 12);
  EXPECT_EQ(arrival_clause(0, float_call(Collective::AllReduce, 12), seen),
            "every rank reached it");
}

TEST(TimeoutSentence, OneShapeForCollectivesAndPointToPoint) {
  std::vector<std::optional<Fingerprint>> seen(3);
  seen[1] = float_call(Collective::AllReduce, 4);
  seen[2] = float_call(Collective::AllReduce, 5);
  EXPECT_EQ(timeout_sentence({0, float_call(Collective::AllReduce, 5), 1500ms, "1",
                              "round 9 in the host arena", seen}),
            "allreduce #5 (count 4, float32, sum) timed out after 1.5s: rank 1 never reached it "
            "(rank 1 last seen in allreduce #4 (count 4, float32, sum)); waiting for rank(s) 1 "
            "(round 9 in the host arena)");
  EXPECT_EQ(timeout_sentence({0, std::nullopt, 300ms, "1, 2", "recv of 64 bytes", {}}),
            "timed out after 0.3s waiting for rank(s) 1, 2 (recv of 64 bytes)");
}

TEST(TimeoutSentence, TheNewerSightingWins) {
  std::vector<std::optional<Fingerprint>> seen(2);
  seen[1] = float_call(Collective::AllReduce, 6);
  transport::merge_sightings(seen, {std::nullopt, float_call(Collective::Barrier, 3),
                                    float_call(Collective::Broadcast, 2)});
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1]->seq, 6u);
  EXPECT_EQ(seen[2]->collective, Collective::Broadcast);
  transport::merge_sightings(seen, {std::nullopt, float_call(Collective::Send, 9)});  // ignored
  EXPECT_EQ(seen[1]->seq, 6u);
}

/// (transport, CHORUS_ALGO): "" lets shared memory pick the arena (shm_direct); "ring"
/// keeps it on the shared-memory links.
class AbsentRank : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// Both ranks complete six all-reduces, then rank 1 stays away from the seventh: rank 0's
// sentence names the call, the time, rank 1 and where rank 1 was last seen.
TEST_P(AbsentRank, OneSentenceOnEveryTransport) {
  const auto& [transport, algo] = GetParam();
  ScopedEnv no_dumps("CHORUS_TRACE_BUFFER", "0");
  ScopedEnv algorithm("CHORUS_ALGO", algo.c_str());
  ThreadJob job(2, {.transport = transport, .timeout = 1s});
  ASSERT_TRUE(job.ok());
  std::atomic<bool> done{false};
  std::string message;
  job.run([&](Communicator& c) {
    int value = 1;
    for (int i = 0; i < 6; ++i) c.all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum);
    if (c.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(10ms);
      return;
    }
    try {
      c.all_reduce(&value, &value, 1, DataType::Int32, ReduceOp::Sum);
      ADD_FAILURE() << "the seventh all-reduce succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Timeout) << e.what();
      message = e.what();
    }
    done = true;
  });
  EXPECT_TRUE(matches(
      message,
      R"(^allreduce #7 \(count 1, int32, sum\) timed out after [0-9]+\.[0-9]s: rank 1 never )"
      R"(reached it \(rank 1 last seen in allreduce #6 \(count 1, int32, sum\)\); waiting )"
      R"(for rank\(s\) 1 \(.+\)$)"))
      << message;
}

INSTANTIATE_TEST_SUITE_P(Transports, AbsentRank,
                         ::testing::Values(std::make_tuple("shm", ""),
                                           std::make_tuple("shm", "ring"),
                                           std::make_tuple("tcp", "")),
                         [](const auto& info) {
                           const std::string algo = std::get<1>(info.param);
                           return std::get<0>(info.param) + (algo.empty() ? "" : "_" + algo);
                         });

}  // namespace
}  // namespace chorus::testing
