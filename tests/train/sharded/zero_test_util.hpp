// Shared pieces of the ZeRO tests: a small MLP in any dtype, the optimizers under test, a
// one-process reference on the whole global batch (plain libtorch: no code shared with
// ZeroOptimizer) and thread-ranks forming one "dp" group with a recording ledger.
#pragma once

#include <chorus/train/zero.hpp>

#include "../tensor_parallel/tp_test_util.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train::zero_test {

using tp_test::expect_close;

enum class Opt { SgdMomentum, Adam, AdamW };

inline std::string name(Opt o) {
  return o == Opt::SgdMomentum ? "sgd-momentum" : o == Opt::Adam ? "adam" : "adamw";
}

inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(Opt o,
                                                               std::vector<at::Tensor> params) {
  using namespace torch::optim;
  switch (o) {
    case Opt::SgdMomentum:
      return std::make_unique<SGD>(params, SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
    case Opt::Adam:
      return std::make_unique<Adam>(params, AdamOptions(0.01));
    case Opt::AdamW:
      return std::make_unique<AdamW>(params, AdamWOptions(0.01).weight_decay(0.1));
  }
  return nullptr;
}

inline ShardOptimizerFactory factory(Opt o) {
  return [o](std::vector<at::Tensor> shards) { return make_optimizer(o, std::move(shards)); };
}

constexpr int kIn = 6;
constexpr int kHidden = 10;
constexpr int kOut = 3;  ///< the last bias: a parameter smaller than 4 ranks

/// Linear-Tanh-Linear-Tanh-Linear from `seed` in `type`: 213 parameters (prime to 2, 3, 4).
inline std::shared_ptr<torch::nn::SequentialImpl> make_mlp(std::uint64_t seed,
                                                           at::ScalarType type) {
  torch::manual_seed(seed);
  auto m = std::make_shared<torch::nn::SequentialImpl>(
      torch::nn::Linear(kIn, kHidden), torch::nn::Tanh(), torch::nn::Linear(kHidden, kHidden),
      torch::nn::Tanh(), torch::nn::Linear(kHidden, kOut));
  m->to(type);
  return m;
}

struct Data {
  std::vector<at::Tensor> x, y;
};

inline Data make_data(int steps, int batch, at::ScalarType type) {
  torch::manual_seed(99);
  Data d;
  for (int s = 0; s < steps; ++s) {
    d.x.push_back(torch::randn({batch, kIn}).to(type));
    d.y.push_back(torch::randn({batch, kOut}).to(type));
  }
  return d;
}

inline std::vector<at::Tensor> clone_params(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

/// The reference's result: every step's loss and the final parameters.
struct Trained {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
  std::vector<double> norms;  ///< gradient norms before clipping (when clipping)
};

/// One process on the whole global batch; clips to `clip` when > 0.
inline Trained reference(const Data& d, Opt o, std::uint64_t seed, double clip = 0) {
  auto model = make_mlp(seed, d.x[0].scalar_type());
  auto opt = make_optimizer(o, model->parameters());
  Trained t;
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    opt->zero_grad();
    auto loss = torch::mse_loss(model->forward(d.x[s]), d.y[s]);
    loss.backward();
    if (clip > 0) t.norms.push_back(torch::nn::utils::clip_grad_norm_(model->parameters(), clip));
    opt->step();
    t.losses.push_back(loss.item<double>());
  }
  t.params = clone_params(*model);
  return t;
}

/// Caps of 8 and 300 bytes: the first bucket is the last bias alone (3 elements), then
/// several more.
inline ZeroOptions small_buckets(int stage) {
  ZeroOptions o;
  o.stage = stage;
  o.first_bucket_bytes = 8;
  o.bucket_cap_bytes = 300;
  return o;
}

/// The elements of `layouts` with their padding (Ψ of PARALLEL.md's memory lines).
inline std::int64_t padded(const std::vector<BucketLayout>& layouts) {
  std::int64_t total = 0;
  for (const auto& b : layouts) total += b.padded_numel;
  return total;
}

/// Steps [from, to) of a run that may resume and save: `load` is a checkpoint to resume from
/// before step `from`, `save` where to save after step `to` (each when not empty).
struct Segment {
  int from = 0, to = 0;
  std::string load;
  std::string save;
};

/// Runs body(group, rank) on n thread-ranks forming one group "dp" whose ledger records.
inline void on_ranks(int n, const std::function<void(const Group&, int)>& body) {
  torch::set_num_threads(1);
  chorus::testing::ThreadJob job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& comm) {
    SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(comm.rank()));
    auto ledger = std::make_shared<CollectiveLedger>();
    ledger->enable();
    body(Group{comm, "dp", ledger}, comm.rank());
  });
}

}  // namespace chorus::train::zero_test
