// Every registered algorithm x rank counts {1,2,3,4,5,7,8} x counts x dtypes x
// ops x roots x in place, on the in-process MemoryTransport (threads as ranks),
// against references computed in the test (sweep.hpp). One fabric and one set
// of threads per rank count; every rank walks the same case list. The fabric's arenas
// are small (kSweepArenaBytes), so that the arena algorithms cut the larger counts into
// several rounds, and hold one shared window large enough for every case's buffers.
#include "algorithms/algorithm.hpp"
#include "algorithms/selection.hpp"
#include "algorithms/window.hpp"
#include "memory_transport.hpp"
#include "scoped_env.hpp"
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

// CHORUS_SHM_ARENA_BYTES of the sweep's arenas: 8 KiB rounds in the halves, so count 1025
// of 8-byte elements, and every case of the shm_window algorithms handed to shm_direct,
// take several rounds, their last one often a lane.
constexpr const char* kSweepArenaBytes = "16384";

class AlgorithmSweep : public ::testing::TestWithParam<int> {};

TEST_P(AlgorithmSweep, EveryAlgorithmMatchesTheReference) {
  const int n = GetParam();
  const std::vector<SweepCase> cases = sweep_cases(n, kSweepProvides);
  MemoryFabric fabric(n);
  {
    ScopedEnv small_arena("CHORUS_SHM_ARENA_BYTES", kSweepArenaBytes);
    fabric.attach_arenas();
  }
  fabric.attach_windows(sweep_window_bytes(cases));
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto failures = run_ranks(fabric, [&](transport::Transport& transport, int rank) {
    for (const SweepCase& c : cases) {
      std::uint64_t sent_before = fabric.messages_sent(rank);
      std::vector<std::string> problems;
      algorithms::Context context{transport, fabric.arena(rank), /*cross_memory=*/true};
      try {
        problems = run_sweep_case(context, c, fabric.window(rank));
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

// Whether every rank's share of a window call (1/n of an all-reduce, its own block
// otherwise) spans at least two kWindowChunkBytes chunks.
bool spans_window_chunks(const SweepCase& c) {
  const std::size_t n = static_cast<std::size_t>(c.nranks);
  const std::size_t share =
      c.algorithm->collective == Collective::AllReduce ? c.count / n : c.count;
  return share * dtype_size(c.dtype) >= 2 * algorithms::kWindowChunkBytes;
}

// Coverage tags of the sweep: what each algorithm meets across all rank counts.
std::map<const algorithms::Algorithm*, std::set<std::string>> coverage_tags() {
  std::map<const algorithms::Algorithm*, std::set<std::string>> seen;
  for (int n : kSweepRankCounts) {
    for (const SweepCase& c : sweep_cases(n, kSweepProvides)) {
      auto& tags = seen[c.algorithm];
      std::string dtype(to_string(c.dtype));
      std::string mode = c.in_place ? "in place" : "out of place";
      tags.insert({"n" + std::to_string(n), "count" + std::to_string(c.count), dtype,
                   dtype + "/" + std::string(to_string(c.op)),
                   "n" + std::to_string(n) + "root" + std::to_string(c.root), mode,
                   std::string(placement_name(c.placement))});
      if (!needs_windows(*c.algorithm) || c.placement != Placement::Windows) continue;
      // What the window algorithms meet in the windows, per rank count.
      const std::string at = "n" + std::to_string(n) + " ";
      tags.insert({at + dtype + "/" + std::string(to_string(c.op)) + " " + mode});
      if (spans_window_chunks(c)) tags.insert({at + "several chunks " + mode});
    }
  }
  return seen;
}

// The tags of an algorithm that needs shared windows, which takes only calls past
// kMinWindowBytes on two ranks or more: in the windows at every rank count, every dtype x op
// in both modes and calls of several chunks in both modes; outside them, on every rank and
// on the last one only (handed to shm_direct).
std::vector<std::string> window_tags(const algorithms::Algorithm& algorithm) {
  std::vector<std::string> tags;
  for (Placement at : {Placement::Windows, Placement::Heap, Placement::LastRankOutside}) {
    tags.emplace_back(placement_name(at));
  }
  for (int n : kSweepRankCounts) {
    if (n < 2) continue;
    const std::string at = "n" + std::to_string(n) + " ";
    for (std::string mode : {"in place", "out of place"}) {
      tags.push_back(at + "several chunks " + mode);
      for (int d = 0; d < kNumDataTypes; ++d) {
        const std::string dtype(to_string(static_cast<DataType>(d)));
        for (int op = 0; op < (is_reducing(algorithm.collective) ? 4 : 1); ++op) {
          tags.push_back(at + dtype + "/" + std::string(to_string(static_cast<ReduceOp>(op))) +
                         " " + mode);
        }
      }
    }
  }
  return tags;
}

// The tags an algorithm must meet: every rank count it accepts, each root
// there (rooted collectives), every count, dtype and, when reducing, dtype/op.
std::vector<std::string> required_tags(const algorithms::Algorithm& algorithm) {
  if (needs_windows(algorithm)) return window_tags(algorithm);
  std::vector<std::string> tags = {"in place", "out of place"};
  for (int n : kSweepRankCounts) {
    if (algorithm.accepts && (n & (n - 1)) != 0) continue;  // the other decliner: powers of two
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
