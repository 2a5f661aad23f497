// assign_buckets: a pure function; checked against hand-computed layouts and invariants.
#include <chorus/error.hpp>
#include <chorus/train/ddp.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace chorus::train {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

TEST(AssignBuckets, ReverseOrderSmallFirstBucket) {
  // Sizes of params 0..5; walking backwards: 5(40) 4(30) | 3(100) | 2(20) 1(50) | 0(10).
  const std::vector<std::size_t> bytes{10, 50, 20, 100, 30, 40};
  EXPECT_EQ(assign_buckets(bytes, 64, 70), (Buckets{{5, 4}, {3}, {2, 1}, {0}}));
  EXPECT_EQ(assign_buckets(bytes, 1, 1000), (Buckets{{5}, {4, 3, 2, 1, 0}}));
  EXPECT_EQ(assign_buckets(bytes, 1000, 1000), (Buckets{{5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(assign_buckets(bytes, 1, 1), (Buckets{{5}, {4}, {3}, {2}, {1}, {0}}));
}

TEST(AssignBuckets, EmptyAndInvalid) {
  EXPECT_TRUE(assign_buckets({}, 10, 10).empty());
  EXPECT_THROW(assign_buckets({1, 2}, 0, 10), chorus::Error);
  EXPECT_THROW(assign_buckets({1, 2}, 10, 0), chorus::Error);
}

TEST(AssignBuckets, InvariantsOnRandomSizes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::size_t> bytes(rng() % 40);
    for (auto& b : bytes) b = rng() % 5000;
    const std::size_t first = 1 + rng() % 3000;
    const std::size_t cap = 1 + rng() % 8000;
    const auto buckets = assign_buckets(bytes, first, cap);
    // Every parameter exactly once, in reverse registration order.
    std::vector<std::size_t> order;
    for (const auto& b : buckets) {
      ASSERT_FALSE(b.empty());
      order.insert(order.end(), b.begin(), b.end());
    }
    std::vector<std::size_t> want(bytes.size());
    std::iota(want.rbegin(), want.rend(), std::size_t{0});
    ASSERT_EQ(order, want);
    // Every bucket but the last reaches its cap, and drops below it without its last parameter.
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const std::size_t limit = k == 0 ? first : cap;
      std::size_t total = 0;
      for (auto p : buckets[k]) total += bytes[p];
      if (k + 1 < buckets.size()) {
        EXPECT_GE(total, limit);
      }
      EXPECT_LT(total - bytes[buckets[k].back()], limit);
    }
  }
}

}  // namespace
}  // namespace chorus::train
