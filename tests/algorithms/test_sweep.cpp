// Every registered algorithm x rank counts {1,2,3,4,5,7,8} x counts x dtypes x
// ops x roots x in place, on the in-process MemoryTransport (threads as ranks),
// against references computed in the test (sweep.hpp). One fabric and one set
// of threads per rank count; every rank walks the same case list.
#include "algorithms/algorithm.hpp"
#include "algorithms/selection.hpp"
#include "memory_transport.hpp"
#include "sweep.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

std::string join(const std::vector<std::string>& lines, std::size_t limit = 12) {
  std::string text;
  for (std::size_t i = 0; i < lines.size() && i < limit; ++i) text += "\n  " + lines[i];
  return text;
}

// Count 0 must not send anything (barrier and all-to-all-v are never empty).
bool must_stay_silent(const SweepCase& c) {
  Collective collective = c.algorithm->collective;
  return c.count == 0 && collective != Collective::Barrier && collective != Collective::AllToAllV;
}

class AlgorithmSweep : public ::testing::TestWithParam<int> {};

TEST_P(AlgorithmSweep, EveryAlgorithmMatchesTheReference) {
  const int n = GetParam();
  const std::vector<SweepCase> cases = sweep_cases(n, kSweepProvides);
  MemoryFabric fabric(n);
  fabric.attach_arenas();
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto failures = run_ranks(fabric, [&](transport::Transport& transport, int rank) {
    for (const SweepCase& c : cases) {
      std::uint64_t sent_before = fabric.messages_sent(rank);
      std::vector<std::string> problems;
      algorithms::Context context{transport, fabric.arena(rank), /*cross_memory=*/true};
      try {
        problems = run_sweep_case(context, c);
      } catch (const Error& e) {
        throw Error(e.status(), describe(c) + ": " + e.what());
      }
      if (must_stay_silent(c) && fabric.messages_sent(rank) != sent_before) {
        problems.push_back("rank " + std::to_string(rank) + " sent a message for count 0");
      }
      std::lock_guard lock(mutex);
      for (const std::string& problem : problems) wrong.push_back(describe(c) + ": " + problem);
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " ranks threw:" << join(failures);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong results among " << cases.size()
                             << " cases:" << join(wrong);
}

INSTANTIATE_TEST_SUITE_P(RankCounts, AlgorithmSweep, ::testing::ValuesIn(kSweepRankCounts),
                         [](const auto& info) { return "ranks" + std::to_string(info.param); });

// A barrier lets nobody out before everybody is in: each rank counts its
// arrival before barrier k and, after it, must see all n arrivals of round k.
TEST(BarrierAlgorithms, NobodyLeavesBeforeEveryoneArrived) {
  constexpr int kRounds = 25;
  for (const algorithms::Algorithm* algorithm : algorithms::all_algorithms()) {
    if (algorithm->collective != Collective::Barrier) continue;
    for (int n : {2, 3, 5, 8}) {
      std::atomic<int> arrivals{0};
      std::atomic<int> early{0};
      MemoryFabric fabric(n);
      fabric.attach_arenas();
      auto failures = run_ranks(fabric, [&](transport::Transport& transport, int rank) {
        algorithms::Call args;
        args.collective = Collective::Barrier;
        algorithms::Context context{transport, fabric.arena(rank), /*cross_memory=*/true};
        for (int round = 0; round < kRounds; ++round) {
          args.fingerprint.seq = static_cast<std::uint64_t>(round);
          context.deadline = Clock::now() + std::chrono::seconds(20);
          arrivals.fetch_add(1);
          algorithm->run(args, context);
          if (arrivals.load() < (round + 1) * n) early.fetch_add(1);
        }
      });
      EXPECT_TRUE(failures.empty()) << algorithm->name << " on " << n << ":" << join(failures);
      EXPECT_EQ(early.load(), 0) << algorithm->name << " on " << n << " ranks let ranks out early";
    }
  }
}

// Coverage tags of the sweep: what each algorithm meets across all rank counts.
std::map<const algorithms::Algorithm*, std::set<std::string>> coverage_tags() {
  std::map<const algorithms::Algorithm*, std::set<std::string>> seen;
  for (int n : kSweepRankCounts) {
    for (const SweepCase& c : sweep_cases(n, kSweepProvides)) {
      auto& tags = seen[c.algorithm];
      std::string dtype(to_string(c.dtype));
      tags.insert({"n" + std::to_string(n), "count" + std::to_string(c.count), dtype,
                   dtype + "/" + std::string(to_string(c.op)),
                   "n" + std::to_string(n) + "root" + std::to_string(c.root),
                   c.in_place ? "in place" : "out of place"});
    }
  }
  return seen;
}

// The tags an algorithm must meet: every rank count it accepts, each root
// there (rooted collectives), every count, dtype and, when reducing, dtype/op.
std::vector<std::string> required_tags(const algorithms::Algorithm& algorithm) {
  // shm_window needs the call's buffers in shared windows, which the sweep's buffers are not
  // (tests/comm/test_shm_window.cpp).
  if ((algorithm.needs & ~kSweepProvides) != 0) return {};
  std::vector<std::string> tags = {"in place", "out of place"};
  for (int n : kSweepRankCounts) {
    if (algorithm.accepts && (n & (n - 1)) != 0) continue;  // the only decliner: powers of two
    tags.push_back("n" + std::to_string(n));
    for (int root = 0; root < (is_rooted(algorithm.collective) ? n : 1); ++root) {
      tags.push_back("n" + std::to_string(n) + "root" + std::to_string(root));
    }
  }
  for (std::size_t count : kSweepCounts) tags.push_back("count" + std::to_string(count));
  for (int d = 0; d < kNumDataTypes; ++d) {
    std::string dtype(to_string(static_cast<DataType>(d)));
    tags.push_back(dtype);
    for (int op = 0; op < 4 && is_reducing(algorithm.collective); ++op) {
      tags.push_back(dtype + "/" + std::string(to_string(static_cast<ReduceOp>(op))));
    }
  }
  return tags;
}

// The generator itself: every algorithm meets every rank count, count, dtype,
// op (reducing), root (rooted) and both in-place modes somewhere.
TEST(AlgorithmSweepCoverage, EveryDimensionIsCovered) {
  auto seen = coverage_tags();
  for (const algorithms::Algorithm* algorithm : algorithms::all_algorithms()) {
    std::vector<std::string> missing;
    for (const std::string& tag : required_tags(*algorithm)) {
      if (seen[algorithm].count(tag) == 0) missing.push_back(tag);
    }
    EXPECT_TRUE(missing.empty()) << to_string(algorithm->collective) << "/" << algorithm->name
                                 << " never meets:" << join(missing);
  }
}

}  // namespace
}  // namespace chorus::testing
