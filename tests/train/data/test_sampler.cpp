// DistributedSampler: per-epoch cover and disjointness for 1..5 ranks and awkward sizes,
// reshuffling, determinism, resume from a saved state.
#include <chorus/train/data.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

namespace chorus::train {
namespace {

const std::size_t kSizes[] = {1, 2, 3, 7, 10, 13, 64, 101};

/// How often each index occurs in the union of all ranks' epoch shares.
std::map<std::size_t, int> occurrences(std::size_t n, int nranks, TailPolicy tail,
                                       std::uint64_t epoch, std::size_t* per_rank) {
  std::map<std::size_t, int> seen;
  for (int r = 0; r < nranks; ++r) {
    DistributedSampler sampler(n, r, nranks, 1234, true, tail);
    sampler.set_epoch(epoch);
    const auto mine = sampler.epoch_indices();
    EXPECT_EQ(mine.size(), sampler.samples_per_rank());
    *per_rank = mine.size();
    for (auto i : mine) {
      EXPECT_LT(i, n);
      ++seen[i];
    }
  }
  return seen;
}

TEST(DistributedSampler, PadCoversEverySampleAndEqualizesRanks) {
  for (int nranks = 1; nranks <= 5; ++nranks) {
    for (std::size_t n : kSizes) {
      for (std::uint64_t epoch : {0u, 1u, 5u}) {
        std::size_t per_rank = 0;
        auto seen = occurrences(n, nranks, TailPolicy::Pad, epoch, &per_rank);
        const std::size_t expected = (n + nranks - 1) / nranks;  // ceil
        EXPECT_EQ(per_rank, expected) << "n=" << n << " ranks=" << nranks;
        EXPECT_EQ(seen.size(), n) << "n=" << n << " ranks=" << nranks;  // complete cover
        // The padding repeats ceil(n/N)*N - n < N samples; each repeat wraps once when
        // n >= N, so no sample is handed out more than twice.
        int total = 0;
        for (auto [index, count] : seen) {
          total += count;
          if (n >= static_cast<std::size_t>(nranks)) {
            EXPECT_LE(count, 2);
          }
        }
        EXPECT_EQ(static_cast<std::size_t>(total), expected * nranks);
      }
    }
  }
}

TEST(DistributedSampler, DropIsDisjointAndDropsLessThanRanks) {
  for (int nranks = 1; nranks <= 5; ++nranks) {
    for (std::size_t n : kSizes) {
      if (n < static_cast<std::size_t>(nranks)) continue;
      std::size_t per_rank = 0;
      auto seen = occurrences(n, nranks, TailPolicy::Drop, 2, &per_rank);
      EXPECT_EQ(per_rank, n / nranks);
      EXPECT_EQ(seen.size(), per_rank * nranks) << "n=" << n << " ranks=" << nranks;
      for (auto [index, count] : seen) EXPECT_EQ(count, 1) << "index " << index;
      EXPECT_LT(n - seen.size(), static_cast<std::size_t>(nranks));
    }
  }
}

TEST(DistributedSampler, EpochsDifferSeedsRepeat) {
  DistributedSampler a(100, 1, 3, 99);
  DistributedSampler b(100, 1, 3, 99);
  DistributedSampler other_seed(100, 1, 3, 100);
  const auto epoch0 = a.epoch_indices();
  EXPECT_EQ(epoch0, b.epoch_indices());
  EXPECT_NE(epoch0, other_seed.epoch_indices());
  a.set_epoch(1);
  EXPECT_NE(epoch0, a.epoch_indices());
  b.set_epoch(1);
  EXPECT_EQ(a.epoch_indices(), b.epoch_indices());
}

TEST(DistributedSampler, WithoutShuffleIsStrided) {
  DistributedSampler sampler(10, 1, 4, 5, false, TailPolicy::Pad);
  EXPECT_EQ(sampler.epoch_indices(), (std::vector<std::size_t>{1, 5, 9}));
  DistributedSampler last(10, 3, 4, 5, false, TailPolicy::Pad);
  EXPECT_EQ(last.epoch_indices(), (std::vector<std::size_t>{3, 7, 1}));  // 11 wraps to 1
}

// Values from an independent Python transcription of splitmix64 + Fisher-Yates: pins the
// order across compilers and standard libraries.
TEST(EpochPermutation, PinnedValues) {
  EXPECT_EQ(epoch_permutation(10, 42, 0), (std::vector<std::size_t>{9, 4, 2, 8, 1, 3, 0, 6, 5, 7}));
  EXPECT_EQ(epoch_permutation(10, 42, 1), (std::vector<std::size_t>{0, 9, 1, 6, 2, 8, 3, 4, 7, 5}));
  EXPECT_EQ(epoch_permutation(12, 7, 3),
            (std::vector<std::size_t>{4, 11, 10, 1, 8, 0, 9, 6, 3, 2, 5, 7}));
}

TEST(EpochPermutation, IsAPermutationAndRoughlyUniform) {
  std::vector<int> position_of_zero(4, 0);
  for (std::uint64_t epoch = 0; epoch < 4000; ++epoch) {
    auto order = epoch_permutation(4, 3, epoch);
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, (std::vector<std::size_t>{0, 1, 2, 3}));
    ++position_of_zero[std::find(order.begin(), order.end(), 0) - order.begin()];
  }
  // 1000 expected per position; the binomial standard deviation is about 27.
  for (int count : position_of_zero) EXPECT_NEAR(count, 1000, 150);
}

TEST(DistributedSampler, BatchesAndResume) {
  DistributedSampler sampler(53, 0, 2, 11);
  const auto all = sampler.epoch_indices();
  ASSERT_EQ(all.size(), 27u);
  std::vector<std::size_t> got;
  for (int b = 0; b < 3; ++b) {
    auto batch = sampler.next_batch(5);
    got.insert(got.end(), batch.begin(), batch.end());
  }
  const SamplerState saved = sampler.state();
  EXPECT_EQ(saved.position, 15u);
  DistributedSampler resumed(53, 0, 2, 11);
  resumed.load_state(saved);
  for (int b = 0; b < 3; ++b) {
    auto expected = sampler.next_batch(5);
    EXPECT_EQ(resumed.next_batch(5), expected);
    got.insert(got.end(), expected.begin(), expected.end());
  }
  EXPECT_EQ(got, all);  // the last batch is short (2), then the epoch is done
  EXPECT_TRUE(sampler.epoch_done());
  EXPECT_TRUE(sampler.next_batch(5).empty());
  sampler.set_epoch(sampler.epoch() + 1);
  resumed.load_state(sampler.state());
  EXPECT_EQ(resumed.next_batch(100), sampler.next_batch(100));
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 2, 2, 0), Error);
  EXPECT_THROW(DistributedSampler(0, 0, 1, 0), Error);
  DistributedSampler sampler(10, 0, 2, 0);
  EXPECT_THROW(sampler.load_state(SamplerState{0, 6}), Error);
}

}  // namespace
}  // namespace chorus::train
