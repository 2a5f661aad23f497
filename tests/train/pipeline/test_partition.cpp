// The stage partition: balanced by cost against a brute-force search, explicit lists checked.
#include <chorus/error.hpp>
#include <chorus/train/pipeline_partition.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

/// The smallest largest stage cost over every cut, by enumeration.
std::int64_t brute_force(const std::vector<std::int64_t>& costs, int stages, std::int64_t first,
                         std::int64_t last) {
  std::int64_t best = -1;
  std::vector<std::int64_t> counts;
  std::function<void(int, int)> place = [&](int stage, int start) {
    const int layers = static_cast<int>(costs.size());
    if (stage == stages) {
      if (start != layers) return;
      std::int64_t worst = 0;
      for (int k = 0, i = 0; k < stages; i += static_cast<int>(counts[k]), ++k) {
        std::int64_t sum = (k == 0 ? first : 0) + (k == stages - 1 ? last : 0);
        for (int l = i; l < i + counts[k]; ++l) sum += costs[l];
        worst = std::max(worst, sum);
      }
      if (best < 0 || worst < best) best = worst;
      return;
    }
    for (int n = 1; start + n <= layers; ++n) {
      counts.push_back(n);
      place(stage + 1, start + n);
      counts.pop_back();
    }
  };
  place(0, 0);
  return best;
}

std::int64_t largest(const std::vector<std::int64_t>& costs, const std::vector<std::int64_t>& cut,
                     std::int64_t first, std::int64_t last) {
  std::int64_t worst = 0;
  std::size_t l = 0;
  for (std::size_t k = 0; k < cut.size(); ++k) {
    std::int64_t sum = (k == 0 ? first : 0) + (k + 1 == cut.size() ? last : 0);
    for (std::int64_t n = 0; n < cut[k]; ++n) sum += costs[l++];
    worst = std::max(worst, sum);
  }
  EXPECT_EQ(l, costs.size());
  return worst;
}

TEST(PipelinePartition, BalancedCutIsOptimal) {
  const std::vector<std::int64_t> costs{5, 1, 7, 3, 3, 2, 8, 1};
  for (int stages = 1; stages <= 8; ++stages)
    for (auto [first, last] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {9, 4}, {2, 20}}) {
      SCOPED_TRACE(std::to_string(stages) + " stages, extras " + std::to_string(first) + " " +
                   std::to_string(last));
      const std::vector<std::int64_t> cut = balanced_partition(costs, stages, first, last);
      ASSERT_EQ(cut.size(), static_cast<std::size_t>(stages));
      check_partition(cut, static_cast<std::int64_t>(costs.size()), stages);
      EXPECT_EQ(largest(costs, cut, first, last), brute_force(costs, stages, first, last));
    }
  // Equal layers: even cuts, the remainder on the earliest stages.
  EXPECT_EQ(balanced_partition(std::vector<std::int64_t>(7, 10), 3),
            (std::vector<std::int64_t>{3, 2, 2}));
}

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PipelinePartition, TooFewLayersAndBadListsAreNamed) {
  EXPECT_EQ(message([] {
              balanced_partition({1, 1}, 3);
            }),
            "pipeline partition: 2 layers for 3 stages; every stage needs a layer");
  EXPECT_EQ(message([] {
              check_partition({2, 0, 2}, 4, 3);
            }),
            "pipeline partition: layers per stage [2, 0, 2] must be positive and sum to 4");
  EXPECT_EQ(message([] {
              check_partition({2, 2}, 5, 2);
            }),
            "pipeline partition: layers per stage [2, 2] must be positive and sum to 5");
  EXPECT_EQ(message([] {
              check_partition({2, 2}, 4, 3);
            }),
            "pipeline partition: 2 layer counts for 3 stages");
  EXPECT_EQ(message([] { check_partition({1}, 1, 0); }), "pipeline partition: 0 stages");
}

}  // namespace
}  // namespace chorus::train
