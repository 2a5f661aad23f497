// The registry and algorithm selection: a pure function of (collective, bytes,
// ranks, machine), CHORUS_ALGO parsing, and the fallback when an algorithm declines.
#include "algorithms/algorithm.hpp"
#include "algorithms/selection.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace chorus::algorithms {
namespace {

Call call(Collective collective, std::size_t count, DataType dtype = DataType::Float32) {
  Call args;
  args.collective = collective;
  args.count = count;
  args.dtype = dtype;
  return args;
}

std::string chosen(Collective collective, std::size_t count, int nranks,
                   std::string_view spec = "") {
  return std::string(select_algorithm(call(collective, count), nranks, kNeedsNothing, spec).name);
}

Status status_of(std::string_view spec) {
  try {
    parse_algorithm_override(spec);
  } catch (const Error& e) {
    return e.status();
  }
  return Status::Success;
}

TEST(AlgorithmRegistry, NamesAreUniquePerCollectiveAndEveryCollectiveHasOne) {
  std::set<std::pair<Collective, std::string_view>> names;
  std::set<Collective> covered;
  for (const Algorithm* algorithm : all_algorithms()) {
    EXPECT_TRUE(names.insert({algorithm->collective, algorithm->name}).second) << algorithm->name;
    EXPECT_FALSE(algorithm->description.empty()) << algorithm->name;
    EXPECT_NE(algorithm->run, nullptr) << algorithm->name;
    EXPECT_NE(algorithm->cost, nullptr) << algorithm->name;
    EXPECT_EQ(find_algorithm(algorithm->collective, algorithm->name), algorithm);
    covered.insert(algorithm->collective);
  }
  for (int c = 0; c < kNumCollectives; ++c) {
    auto collective = static_cast<Collective>(c);
    bool point_to_point = collective == Collective::Send || collective == Collective::Recv;
    EXPECT_EQ(covered.count(collective) == 1, !point_to_point) << to_string(collective);
  }
  EXPECT_EQ(find_algorithm(Collective::AllReduce, "binomial"), nullptr);
  EXPECT_EQ(find_algorithm(Collective::Gather, "no_such"), nullptr);
}

// The cost model's choices on one host with the default parameters
// (test_cost_model.cpp checks the model itself).
TEST(AlgorithmSelection, DefaultsFollowTheCostModel) {
  EXPECT_EQ(chosen(Collective::AllReduce, 4, 8), "recursive_doubling");
  EXPECT_EQ(chosen(Collective::AllReduce, 4 << 20, 8), "rabenseifner");
  EXPECT_EQ(chosen(Collective::AllReduce, 4 << 20, 3), "ring");
  EXPECT_EQ(chosen(Collective::Broadcast, 4, 8), "knomial");
  EXPECT_EQ(chosen(Collective::Broadcast, 4 << 20, 8), "ring");
  EXPECT_EQ(chosen(Collective::Reduce, 4, 8), "knomial");
  EXPECT_EQ(chosen(Collective::AllGather, 4, 4), "recursive_doubling");
  EXPECT_EQ(chosen(Collective::AllGather, 4, 7), "bruck");
  EXPECT_EQ(chosen(Collective::AllGather, 1 << 20, 7), "ring");
  EXPECT_EQ(chosen(Collective::ReduceScatter, 4, 8), "recursive_halving");
  EXPECT_EQ(chosen(Collective::ReduceScatter, 1 << 20, 7), "ring");
  EXPECT_EQ(chosen(Collective::Gather, 100, 8), "binomial");
  EXPECT_EQ(chosen(Collective::AllToAll, 1, 8), "bruck");
  EXPECT_EQ(chosen(Collective::AllToAll, 1 << 20, 8), "pairwise");
  EXPECT_EQ(chosen(Collective::AllToAllV, 0, 4), "pairwise");
  EXPECT_EQ(chosen(Collective::Barrier, 0, 4), "dissemination");
}

TEST(AlgorithmSelection, DeclinedPreferenceFallsBackToAnAcceptingAlgorithm) {
  // recursive_doubling all-gather declines 3 ranks.
  EXPECT_EQ(chosen(Collective::AllGather, 100, 3), "ring");
  EXPECT_EQ(chosen(Collective::AllGather, 100, 3, "allgather=recursive_doubling"), "ring");
  EXPECT_EQ(chosen(Collective::AllGather, 1 << 20, 8, "allgather=recursive_doubling"),
            "recursive_doubling");
}

TEST(AlgorithmSelection, IsAPureFunctionOfTheSharedArguments) {
  Call a = call(Collective::AllReduce, 5000);
  Call b = a;
  int x = 0, y = 0;
  a.send = a.recv = &x;  // buffers differ between ranks; the choice must not
  b.send = b.recv = &y;
  b.root = 3;
  for (int n = 1; n <= 9; ++n) {
    EXPECT_EQ(&select_algorithm(a, n, kNeedsNothing), &select_algorithm(b, n, kNeedsNothing));
    EXPECT_EQ(&select_algorithm(a, n, kNeedsArena, "ring"),
              &select_algorithm(b, n, kNeedsArena, "ring"));
  }
}

// The cache answers what select() answers, for every collective, many sizes (far
// more than its 64 entries, so entries are replaced), with and without an arena, fp32 and
// fp16 (whose partials cost twice the bytes), asked in two passes so that the second pass is
// served by whatever the first left.
TEST(SelectionCache, AnswersWhatSelectAnswers) {
  const std::vector<AlgorithmOverride> overrides = parse_algorithm_override("broadcast=ring");
  for (int nranks : {2, 3, 8}) {
    SelectionContext context = single_host_context(nranks);
    SelectionCache cache;
    for (int pass = 0; pass < 2; ++pass) {
      for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                           Collective::AllGather, Collective::ReduceScatter, Collective::Gather,
                           Collective::Scatter, Collective::AllToAll, Collective::Barrier}) {
        for (std::size_t count = 0; count < (std::size_t{1} << 24); count = count * 3 + 1) {
          for (Needs provided : {kNeedsNothing, kNeedsArena}) {
            for (DataType dtype : {DataType::Float32, DataType::Float16}) {
              Call args = call(c, count, dtype);
              const Selection expected = select(args, provided, context, overrides);
              const Selection& got = cache.select(args, provided, context, overrides);
              EXPECT_EQ(got.algorithm, expected.algorithm) << to_string(c) << " " << count;
              EXPECT_EQ(got.chunk_bytes, expected.chunk_bytes) << to_string(c) << " " << count;
            }
          }
        }
      }
    }
  }
}

TEST(AlgorithmOverride, BareNameAppliesToEveryCollectiveThatHasIt) {
  EXPECT_EQ(chosen(Collective::AllReduce, 10, 4, "ring"), "ring");
  EXPECT_EQ(chosen(Collective::Broadcast, 10, 4, "ring"), "ring");
  EXPECT_EQ(chosen(Collective::AllGather, 10, 4, "ring"), "ring");
  EXPECT_EQ(chosen(Collective::Gather, 10, 4, "ring"), "binomial");  // gather has no ring
  EXPECT_EQ(chosen(Collective::Gather, 10, 4, "linear"), "linear");
}

TEST(AlgorithmOverride, CollectiveEntriesBeatBareNamesAndLaterEntriesWin) {
  const char* spec = " allreduce = reduce_broadcast , broadcast=ring,ring ";
  EXPECT_EQ(chosen(Collective::AllReduce, 10, 4, spec), "reduce_broadcast");
  EXPECT_EQ(chosen(Collective::Broadcast, 10, 4, spec), "ring");
  EXPECT_EQ(chosen(Collective::AllGather, 10, 4, spec), "ring");
  EXPECT_EQ(chosen(Collective::AllReduce, 1 << 20, 4,
                   "allreduce=recursive_doubling,allreduce=reduce_broadcast"),
            "reduce_broadcast");
  EXPECT_EQ(chosen(Collective::AllReduce, 10, 4, ",,"), "recursive_doubling");
}

TEST(AlgorithmOverride, ParsesEntries) {
  auto overrides = parse_algorithm_override("gather=binomial, ring");
  ASSERT_EQ(overrides.size(), 2u);
  EXPECT_EQ(overrides[0].collective, Collective::Gather);
  EXPECT_EQ(overrides[0].name, "binomial");
  EXPECT_FALSE(overrides[1].collective.has_value());
  EXPECT_EQ(requested_algorithm(overrides, Collective::Gather), "binomial");
  EXPECT_EQ(requested_algorithm(overrides, Collective::ReduceScatter), "ring");
  EXPECT_EQ(requested_algorithm(overrides, Collective::Scatter), "");
}

TEST(AlgorithmOverride, RejectsMalformedSpecsWithASentence) {
  EXPECT_EQ(status_of(""), Status::Success);
  EXPECT_EQ(status_of("allreduce=ring"), Status::Success);
  EXPECT_EQ(status_of("allreduce="), Status::InvalidArgument);
  EXPECT_EQ(status_of("=ring"), Status::InvalidArgument);
  EXPECT_EQ(status_of("allreduse=ring"), Status::InvalidArgument);
  EXPECT_EQ(status_of("allreduce=binomial"), Status::InvalidArgument);
  EXPECT_EQ(status_of("rnig"), Status::InvalidArgument);
  try {
    parse_algorithm_override("allreduce=fast");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ring, recursive_doubling, reduce_broadcast"),
              std::string::npos)
        << e.what();
  }
}

TEST(AlgorithmSelection, PointToPointHasNoAlgorithms) {
  EXPECT_THROW(select_algorithm(call(Collective::Send, 1), 2, kNeedsNothing), Error);
  try {
    default_selection(call(Collective::Recv, 4), kNeedsNothing, single_host_context(2));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidUsage);
  }
}

}  // namespace
}  // namespace chorus::algorithms
