// Helpers for the DDP tests: a small regression model, deterministic data, a single-process
// reference trainer and comparisons. The reference is plain libtorch on the whole global batch:
// it shares no code with DistributedDataParallel.
#pragma once

#include <chorus/train/ddp.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

namespace chorus::train::testing {

constexpr int kIn = 6;
constexpr int kHidden = 10;
constexpr int kOut = 3;

/// Linear-Tanh-Linear-Tanh-Linear built from seed `seed` (parameters differ across seeds).
inline std::shared_ptr<torch::nn::SequentialImpl> make_mlp(std::uint64_t seed,
                                                           int hidden = kHidden) {
  torch::manual_seed(seed);
  return std::make_shared<torch::nn::SequentialImpl>(
      torch::nn::Linear(kIn, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, hidden),
      torch::nn::Tanh(), torch::nn::Linear(hidden, kOut));
}

/// Global batches: steps x (X [batch, kIn], Y [batch, kOut]).
struct Data {
  std::vector<torch::Tensor> x;
  std::vector<torch::Tensor> y;
};

inline Data make_data(int steps, int batch, std::uint64_t seed) {
  torch::manual_seed(seed);
  Data d;
  for (int s = 0; s < steps; ++s) {
    d.x.push_back(torch::randn({batch, kIn}));
    d.y.push_back(torch::randn({batch, kOut}));
  }
  return d;
}

/// Rows [first, first + count) of each rank's share when a batch is split as `sizes`.
inline std::int64_t share_begin(const std::vector<int>& sizes, int rank) {
  std::int64_t first = 0;
  for (int r = 0; r < rank; ++r) first += sizes[static_cast<std::size_t>(r)];
  return first;
}

inline std::vector<torch::Tensor> clone_params(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

inline void expect_params_near(const std::vector<torch::Tensor>& got,
                               const std::vector<torch::Tensor>& want, double atol,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = (got[i] - want[i]).abs().max().item<double>();
    EXPECT_LE(diff, atol) << what << ": parameter " << i << " differs by " << diff;
  }
}

/// SGD(lr 0.1, momentum 0.9) or Adam(lr 0.01) over `params`.
inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(bool adam,
                                                               std::vector<torch::Tensor> params) {
  if (adam) return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.01));
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
}

/// One process, whole global batch per step: the parameters DDP must reproduce.
inline std::vector<torch::Tensor> reference_training(const Data& d, bool adam, std::uint64_t seed,
                                                     int hidden = kHidden) {
  auto model = make_mlp(seed, hidden);
  auto opt = make_optimizer(adam, model->parameters());
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    opt->zero_grad();
    torch::mse_loss(model->forward(d.x[s]), d.y[s]).backward();
    opt->step();
  }
  return clone_params(*model);
}

/// Runs `body(rank, comm)` on n thread-ranks (torch single-threaded, as in a real rank).
inline void run_ranks(int n, const std::function<void(int, chorus::Communicator&)>& body) {
  torch::set_num_threads(1);
  chorus::testing::ThreadJob job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](chorus::Communicator& comm) { body(comm.rank(), comm); });
}

/// One DDP step of the MLP on rows [first, first + count); returns the local loss. With
/// `clip` > 0 the gradients are clipped to that global norm, which goes to *norm.
inline double mlp_step(DistributedDataParallel& ddp, torch::nn::SequentialImpl& model,
                       torch::optim::Optimizer& opt, const Data& d, std::size_t s,
                       std::int64_t first, std::int64_t count, double clip = 0,
                       double* norm = nullptr) {
  opt.zero_grad();
  ddp.prepare_for_backward(count);
  auto loss = torch::mse_loss(model.forward(d.x[s].narrow(0, first, count)),
                              d.y[s].narrow(0, first, count));
  loss.backward();
  ddp.finish_gradient_sync();
  if (clip > 0) *norm = ddp.clip_grad_norm(clip);
  opt.step();
  ddp.after_optimizer_step();
  return loss.item<double>();
}

}  // namespace chorus::train::testing
