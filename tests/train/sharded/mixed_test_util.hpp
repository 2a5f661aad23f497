// Shared pieces of the mixed-precision resume tests (test_zero_mixed.cpp, the MLP, and
// test_zero_mixed_gpt.cpp): what a rank holds of a ZeRO run (the fp32 masters and compute
// parameters whole, its master shards and their optimizer state), compared bit for bit.
#pragma once

#include <chorus/train/zero.hpp>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace chorus::train::zero_test {

/// One rank's training state after a run.
struct RankState {
  std::vector<at::Tensor> masters;  ///< every parameter's fp32 master, whole
  std::vector<at::Tensor> params;   ///< every compute parameter (the half type), whole
  std::vector<at::Tensor> shards;   ///< per shard: the master shard, its state tensors, its step
};

/// Collective over `zero`'s group (ZeroOptimizer or Zero3): the rank's state, `params` its
/// whole compute parameters.
template <class Zero>
RankState rank_state(Zero& zero, std::vector<at::Tensor> params) {
  RankState r{zero.master_parameters(), std::move(params), {}};
  for (const at::Tensor& shard : zero.parameter_shards()) {
    r.shards.push_back(shard.detach().clone());
    const ShardState state = shard_state(zero.optimizer(), shard);
    for (const auto& [name, t] : state.tensors) r.shards.push_back(t.detach().clone());
    r.shards.push_back(at::scalar_tensor(state.step, at::kLong));
  }
  return r;
}

/// Every tensor of `got` bit-equal to `want`'s (compared in fp64, which holds every value of
/// the half types, fp32 and the step counts exactly).
inline void expect_same_state(const RankState& got, const RankState& want,
                              const std::string& what) {
  const auto same = [&](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                        const std::string& kind) {
    ASSERT_EQ(a.size(), b.size()) << what << ": " << kind;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].scalar_type(), b[i].scalar_type()) << what << ": " << kind << " " << i;
      EXPECT_TRUE(torch::equal(a[i].to(at::kDouble), b[i].to(at::kDouble)))
          << what << ": " << kind << " " << i << " differs";
    }
  };
  same(got.masters, want.masters, "master");
  same(got.params, want.params, "parameter");
  same(got.shards, want.shards, "shard tensor");
}

}  // namespace chorus::train::zero_test
