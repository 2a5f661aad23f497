// Distributed evaluation with threads as ranks: shards cover the dataset exactly, and the
// all-reduced metrics equal one process's over the whole dataset for 1..5 ranks.
#include <chorus/train/data.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace chorus::train {
namespace {

/// A synthetic per-sample loss and correctness, the same function on every rank.
double sample_loss(std::size_t i) { return 0.1 + std::fmod(static_cast<double>(i) * 0.7391, 2.3); }
bool sample_correct(std::size_t i) { return (i * 7) % 5 < 3; }

EvalSums sums_over(std::size_t first, std::size_t last) {
  EvalSums sums;
  for (std::size_t i = first; i < last; ++i) {
    sums.loss_sum += sample_loss(i);
    sums.correct += sample_correct(i) ? 1 : 0;
    sums.count += 1;
  }
  return sums;
}

TEST(EvalShard, DisjointCompleteBalanced) {
  for (int nranks = 1; nranks <= 7; ++nranks) {
    for (std::size_t n : {0u, 1u, 5u, 10u, 103u}) {
      std::size_t next = 0;
      for (int r = 0; r < nranks; ++r) {
        auto [first, last] = eval_shard(n, r, nranks);
        EXPECT_EQ(first, next) << "n=" << n << " ranks=" << nranks << " rank=" << r;
        EXPECT_LE(last - first, n / nranks + 1);
        EXPECT_GE(last - first, n / nranks);
        next = last;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(AllReduceEval, EqualsSingleProcess) {
  const std::size_t n = 103;  // divisible by none of 2..5
  const EvalResult reference = eval_result(sums_over(0, n));
  ASSERT_EQ(reference.count, 103);
  for (int nranks = 1; nranks <= 5; ++nranks) {
    testing::ThreadJob job(nranks);
    ASSERT_TRUE(job.ok());
    std::vector<EvalResult> results(nranks);
    job.run([&](Communicator& comm) {
      auto [first, last] = eval_shard(n, comm.rank(), comm.size());
      results[comm.rank()] = all_reduce_eval(comm, sums_over(first, last));
    });
    for (const auto& result : results) {
      EXPECT_EQ(result.count, reference.count) << nranks << " ranks";
      EXPECT_EQ(result.correct, reference.correct) << nranks << " ranks";
      EXPECT_NEAR(result.mean_loss, reference.mean_loss, 1e-12) << nranks << " ranks";
      EXPECT_NEAR(result.perplexity, std::exp(reference.mean_loss), 1e-10);
      EXPECT_DOUBLE_EQ(result.accuracy, static_cast<double>(reference.correct) / 103.0);
    }
  }
}

}  // namespace
}  // namespace chorus::train
