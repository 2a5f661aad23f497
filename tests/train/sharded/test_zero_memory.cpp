// ZeRO's memory per rank against PARALLEL.md section 3 (fp32: Adam K = 8, SGD-momentum K = 4;
// Ψ counted with each bucket's padding), odd layouts (a bucket smaller than the group, a
// zero-size bucket) and the refusals.
#include "zero_test_util.hpp"

#include <chorus/error.hpp>

namespace chorus::train::zero_test {
namespace {

/// Ψ with the padding: the sum of the buckets' padded sizes.
std::int64_t padded_params(const ZeroOptimizer& zero) {
  std::int64_t total = 0;
  for (const auto& b : zero.reducer().bucket_layouts()) total += b.padded_numel;
  return total;
}

/// One fp32 step, then the bytes: parameters 4Ψ; gradients 4Ψ (stage 1) or 4Ψ/d (stage 2);
/// optimizer state KΨ/d.
void expect_memory(const Group& group, int stage, Opt opt, std::int64_t k) {
  SCOPED_TRACE("ZeRO-" + std::to_string(stage) + ", " + name(opt));
  // The weights do not matter here (the threads may interleave their draws).
  auto model = make_mlp(3, at::kFloat);
  std::int64_t psi = 0;
  for (const auto& p : model->parameters()) psi += p.numel();
  ZeroOptimizer zero(model->parameters(), group, factory(opt), small_buckets(stage));
  const std::int64_t d = group.size();
  const std::int64_t padded = padded_params(zero);
  const auto layouts = zero.reducer().bucket_layouts();
  EXPECT_EQ(padded % d, 0);
  EXPECT_LT(padded - psi, static_cast<std::int64_t>(layouts.size()) * d);
  const Data data = make_data(1, 4 * static_cast<int>(d), at::kFloat);
  zero.zero_grad();
  zero.begin_step();
  torch::mse_loss(model->forward(data.x[0].narrow(0, 4 * group.rank(), 4)),
                  data.y[0].narrow(0, 4 * group.rank(), 4))
      .backward();
  zero.finish_step();
  zero.step();
  const ZeroOptimizer::Memory m = zero.memory();
  EXPECT_EQ(m.parameters, 4 * padded);
  EXPECT_EQ(m.gradients, stage == 1 ? 4 * padded : 4 * padded / d);
  EXPECT_EQ(m.optimizer_state, k * padded / d);
  // The formulas of section 3 (fp32 Adam: ZeRO-1 8Ψ + 8Ψ/d, ZeRO-2 4Ψ + 12Ψ/d).
  const std::int64_t formula =
      stage == 1 ? (8 * padded + k * padded / d) : (4 * padded + (4 + k) * padded / d);
  EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state, formula);
  if (stage == 2) {
    for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
  }
}

TEST(ZeroMemory, PerRankBytesMatchTheFormulas) {
  for (int n : {1, 2, 4}) {
    on_ranks(n, [](const Group& group, int) {
      for (int stage : {1, 2}) {
        expect_memory(group, stage, Opt::Adam, 8);
        expect_memory(group, stage, Opt::AdamW, 8);
        expect_memory(group, stage, Opt::SgdMomentum, 4);
      }
    });
  }
}

// Parameters given as tensors and gradients set by hand (mark_ready, no hooks): a trailing
// empty parameter after a full bucket makes a zero-size bucket, a 1-element one a bucket
// smaller than the group.
// The result is the reference SGD step on the ranks' mean gradient.
TEST(ZeroMemory, ZeroSizeAndTinyBuckets) {
  for (int n : {1, 2, 3, 4}) {
    for (int stage : {1, 2}) {
      on_ranks(n, [stage](const Group& group, int rank) {
        std::vector<at::Tensor> params{torch::zeros({0}, at::kDouble).requires_grad_(),
                                       torch::arange(40, at::kDouble).requires_grad_(),
                                       torch::ones({1}, at::kDouble).requires_grad_()};
        const auto initial =
            std::vector<at::Tensor>{params[1].detach().clone(), params[2].detach().clone()};
        ZeroOptions o = small_buckets(stage);
        o.autograd_hooks = false;
        ZeroOptimizer zero(params, group, factory(Opt::SgdMomentum), o);
        const auto layouts = zero.reducer().bucket_layouts();
        ASSERT_EQ(layouts.size(), 3u);
        EXPECT_EQ(layouts.back().numel, 0);
        EXPECT_EQ(layouts.back().padded_numel, 0);
        EXPECT_EQ(layouts.front().padded_numel, group.size());  // 1 element padded
        zero.zero_grad();
        zero.begin_step();
        for (std::size_t i = params.size(); i-- > 0;) {
          params[i].mutable_grad() = torch::full(params[i].sizes(), 1.0 + rank + i, at::kDouble);
          zero.mark_ready(params[i]);
        }
        zero.finish_step();
        zero.step();
        const double mean_rank = (group.size() - 1) / 2.0;
        for (std::size_t i = 1; i < params.size(); ++i) {
          // SGD(lr 0.1, weight decay 0.01), first step: p - 0.1 (g + 0.01 p).
          const at::Tensor want = initial[i - 1] - 0.1 * (1.0 + mean_rank + static_cast<double>(i) +
                                                          0.01 * initial[i - 1]);
          expect_close(params[i].detach(), want, "parameter " + std::to_string(i));
        }
      });
    }
  }
}

TEST(ZeroMemory, Refusals) {
  on_ranks(2, [](const Group& group, int) {
    auto model = make_mlp(1, at::kFloat);
    EXPECT_THROW(ZeroOptimizer(model->parameters(), group, factory(Opt::Adam), small_buckets(3)),
                 Error);
    // An optimizer over the model's parameters instead of the shards.
    auto params = model->parameters();
    EXPECT_THROW(
        ZeroOptimizer(
            params, group,
            [&](std::vector<at::Tensor>) { return make_optimizer(Opt::Adam, model->parameters()); },
            small_buckets(1)),
        Error);
    ReducerOptions r;
    r.sharding = GradSharding::Keep;
    r.compression = GradCompression::Bf16;
    EXPECT_THROW(GradientReducer(model->parameters(), group, r), Error);
    ZeroOptimizer zero(model->parameters(), group, factory(Opt::Adam), small_buckets(2));
    zero.begin_step();
    EXPECT_THROW(zero.step(), Error);  // the gradient step is still active
  });
}

}  // namespace
}  // namespace chorus::train::zero_test
