// ZeRO-1/2/3 with mixed precision (ZeroOptions / Zero3Options::mixed_precision), threads as
// ranks: the MLP's parameters computed, reduced and gathered in bf16 or fp16 (fp16 computes
// through fp32 copies: torch 1.13 has no fp16 matrix products on CPU), the optimizer stepping
// fp32 master shards.
// - At dp 1 every stage is bit-equal to a plain one-process mixed-precision loop (fp32 master,
//   half copy, half gradients upcast for the step): the same arithmetic.
// - At dp 2 and 4 every stage stays within the documented tolerance of the fp32 one-process
//   reference after 5 SGD-momentum steps (docs/parallel.md, "Mixed precision").
// - Memory per rank equals PARALLEL.md section 3's mixed-precision lines (Adam, K = 12):
//   ZeRO-1 4Ψ + 12Ψ/d, ZeRO-2 2Ψ + 14Ψ/d, ZeRO-3 16Ψ/d (Ψ with the padding).
// - A run saved (sharded_checkpoint.hpp: the fp32 masters) and resumed at dp 2 continues
//   bit-equal to the uninterrupted run: masters, half parameters and optimizer state.
// - Refusals: a half type other than bf16/fp16, parameters that are not fp32.
#include "zero3_test_util.hpp"

#include "../checkpoint_test_util.hpp"
#include "mixed_test_util.hpp"

#include <chorus/error.hpp>
#include <chorus/train/sharded_checkpoint.hpp>

namespace chorus::train::zero_test {
namespace {

constexpr int kSteps = 5, kBatch = 12;
constexpr int kSaveAt = 3;  ///< the resume test's checkpoint: after step 3 of kSteps
constexpr std::uint64_t kSeed = 7;

/// One Linear in `half`: bf16 computes in bf16; fp16 through fp32 copies of its parameters
/// (autograd casts the gradients back to fp16). Input and output in fp32.
at::Tensor layer_forward(torch::nn::LinearImpl& linear, const at::Tensor& x, at::ScalarType half) {
  if (half == at::kBFloat16) return linear.forward(x.to(half)).to(at::kFloat);
  return torch::nn::functional::linear(x, linear.weight.to(at::kFloat), linear.bias.to(at::kFloat));
}

/// The MLP with each Linear through layer_forward (tanh in fp32), optionally unit by unit.
at::Tensor half_forward(torch::nn::SequentialImpl& m, at::Tensor x, at::ScalarType half,
                        Zero3* zero = nullptr) {
  for (std::size_t layer = 0; layer < kMlpUnits.size(); ++layer) {
    auto& linear = *m.ptr(2 * layer)->as<torch::nn::LinearImpl>();
    const auto body = [&](const at::Tensor& h) { return layer_forward(linear, h, half); };
    x = zero ? zero->run_unit(layer, x, body) : body(x);
    if (layer + 1 < kMlpUnits.size()) x = torch::tanh(x);
  }
  return x;
}

/// One process, plainly: fp32 masters, the model a half copy, the half gradients upcast for
/// the optimizer's step and its result rounded back.
std::vector<at::Tensor> mixed_reference(const Data& d, Opt o, at::ScalarType half) {
  auto model = make_mlp(kSeed, at::kFloat);
  std::vector<at::Tensor> masters;
  for (const auto& p : model->parameters()) masters.push_back(p.detach().clone().requires_grad_());
  model->to(half);
  auto opt = make_optimizer(o, masters);
  const auto params = model->parameters();
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    for (const auto& p : params) p.mutable_grad() = at::Tensor();
    torch::mse_loss(half_forward(*model, d.x[s], half), d.y[s]).backward();
    for (std::size_t i = 0; i < params.size(); ++i) {
      masters[i].mutable_grad() = params[i].grad().to(at::kFloat);
    }
    opt->step();
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(masters[i]);
  }
  std::vector<at::Tensor> out;
  for (const auto& m : masters) out.push_back(m.detach().clone());
  return out;
}

struct MixedRun {
  int stage = 1;
  at::ScalarType half = at::kBFloat16;
  Opt opt = Opt::SgdMomentum;
};

std::string describe(const MixedRun& s, int ranks) {
  return "ZeRO-" + std::to_string(s.stage) + " " + (s.half == at::kHalf ? "fp16" : "bf16") + ", " +
         name(s.opt) + ", dp " + std::to_string(ranks);
}

/// Steps [seg.from, seg.to) at dp `ranks` under `s`, resuming from seg.load and saving to
/// seg.save when given; every rank's state after. A ZeRO-1/2 load needs nothing else
/// (zero_state); ZeRO-3 then rounds the loaded masters into its half blocks (zero3_state).
std::vector<RankState> run_mixed(const MixedRun& s, int ranks, const Data& d, const Segment& seg) {
  std::vector<RankState> result(static_cast<std::size_t>(ranks));
  // Built before the threads start: make_mlp seeds torch's one global generator.
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
  for (int r = 0; r < ranks; ++r) models.push_back(make_mlp(kSeed, at::kFloat));
  on_ranks(ranks, [&](const Group& group, int rank) {
    auto& model = models[static_cast<std::size_t>(rank)];
    const std::int64_t rows = kBatch / ranks;
    std::unique_ptr<ZeroOptimizer> zero;
    std::unique_ptr<Zero3> zero3;
    ShardedState state;
    if (s.stage == 3) {
      Zero3Options o;
      o.mixed_precision = s.half;
      zero3 = std::make_unique<Zero3>(model->parameters(), kMlpUnits, group, factory(s.opt), o);
      state = zero3_state(*zero3, module_parameter_pieces(*model));
    } else {
      ZeroOptions o = small_buckets(s.stage);
      o.mixed_precision = s.half;
      zero = std::make_unique<ZeroOptimizer>(model->parameters(), group, factory(s.opt), o);
      state = zero_state(*zero, module_parameter_pieces(*model));
    }
    if (!seg.load.empty()) {
      EXPECT_EQ(load_sharded_checkpoint(seg.load, *model, state).step, seg.from);
      if (zero3) zero3->refresh_from_shards();
    }
    for (int step = seg.from; step < seg.to; ++step) {
      const auto x = d.x[static_cast<std::size_t>(step)].narrow(0, rank * rows, rows);
      const auto y = d.y[static_cast<std::size_t>(step)].narrow(0, rank * rows, rows);
      if (zero3) {
        zero3->zero_grad();
        zero3->begin_weighted_step(rows, rows);
        torch::mse_loss(half_forward(*model, x, s.half, zero3.get()), y).backward();
        zero3->finish_step();
        zero3->step();
      } else {
        zero->zero_grad();
        zero->begin_weighted_step(rows, rows);
        torch::mse_loss(half_forward(*model, x, s.half), y).backward();
        zero->finish_step();
        zero->step();
      }
    }
    if (!seg.save.empty()) {
      save_sharded_checkpoint(seg.save, *model, state, TrainingState{seg.to, 0, {}, {}},
                              group.comm);
    }
    result[static_cast<std::size_t>(rank)] = zero3 ? rank_state(*zero3, zero3->full_parameters())
                                                   : rank_state(*zero, clone_params(*model));
  });
  return result;
}

/// kSteps at dp `ranks` under `s`: rank 0's fp32 master parameters, whole.
std::vector<at::Tensor> run_mixed(const MixedRun& s, int ranks, const Data& d) {
  return run_mixed(s, ranks, d, {0, kSteps, "", ""}).front().masters;
}

TEST(ZeroMixedPrecision, OneRankEqualsThePlainMixedLoop) {
  const Data d = make_data(kSteps, kBatch, at::kFloat);
  for (at::ScalarType half : {at::kBFloat16, at::kHalf}) {
    for (Opt o : {Opt::SgdMomentum, Opt::Adam}) {
      const auto want = mixed_reference(d, o, half);
      for (int stage : {1, 2, 3}) {
        const MixedRun s{stage, half, o};
        SCOPED_TRACE(describe(s, 1));
        const auto got = run_mixed(s, 1, d);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
        }
      }
    }
  }
}

/// The documented tolerances against the fp32 reference after 5 SGD-momentum steps (lr 0.1):
/// relative to the tensor's largest element, about 4 roundings of the half type's unit.
double tolerance(at::ScalarType half) { return half == at::kBFloat16 ? 3e-2 : 4e-3; }

TEST(ZeroMixedPrecision, EveryStageWithinTheToleranceOfFp32) {
  const Data d = make_data(kSteps, kBatch, at::kFloat);
  const Trained fp32 = reference(d, Opt::SgdMomentum, kSeed);
  for (at::ScalarType half : {at::kBFloat16, at::kHalf}) {
    for (int stage : {1, 2, 3}) {
      for (int ranks : {2, 4}) {
        const MixedRun s{stage, half, Opt::SgdMomentum};
        SCOPED_TRACE(describe(s, ranks));
        const auto got = run_mixed(s, ranks, d);
        for (std::size_t i = 0; i < got.size(); ++i) {
          expect_close(got[i], fp32.params[i], "parameter " + std::to_string(i), tolerance(half));
        }
      }
    }
  }
}

// Saved after kSaveAt steps at dp 2 (uneven shards), resumed at dp 2 for the rest: every rank's
// masters, half parameters, master shards and Adam state bit-equal to the uninterrupted run's.
TEST(ZeroMixedPrecision, ResumedRunEqualsTheUninterruptedOne) {
  const Data d = make_data(kSteps, kBatch, at::kFloat);
  const chorus::testing::TempDir dir("zero_mixed_resume");
  for (at::ScalarType half : {at::kBFloat16, at::kHalf}) {
    for (int stage : {1, 2, 3}) {
      const MixedRun s{stage, half, Opt::Adam};
      SCOPED_TRACE(describe(s, 2));
      const std::string ck = dir.file("ck" + std::to_string(stage) + c10::toString(half));
      const std::vector<RankState> whole = run_mixed(s, 2, d, {0, kSteps, "", ""});
      run_mixed(s, 2, d, {0, kSaveAt, "", ck});
      const std::vector<RankState> resumed = run_mixed(s, 2, d, {kSaveAt, kSteps, ck, ""});
      for (std::size_t r = 0; r < whole.size(); ++r) {
        expect_same_state(resumed[r], whole[r], "rank " + std::to_string(r));
      }
    }
  }
}

// One bf16 Adam step, then the bytes against PARALLEL.md's mixed-precision lines.
TEST(ZeroMixedPrecision, MemoryMatchesTheMixedPrecisionFormulas) {
  for (int n : {1, 2, 4}) {
    on_ranks(n, [](const Group& group, int rank) {
      const std::int64_t d = group.size();
      const Data data = make_data(1, 4 * static_cast<int>(d), at::kFloat);
      const auto x = data.x[0].narrow(0, 4 * rank, 4), y = data.y[0].narrow(0, 4 * rank, 4);
      for (int stage : {1, 2}) {
        SCOPED_TRACE("ZeRO-" + std::to_string(stage));
        auto model = make_mlp(3, at::kFloat);
        ZeroOptions o = small_buckets(stage);
        o.mixed_precision = at::kBFloat16;
        ZeroOptimizer zero(model->parameters(), group, factory(Opt::Adam), o);
        zero.zero_grad();
        zero.begin_step();
        torch::mse_loss(half_forward(*model, x, at::kBFloat16), y).backward();
        zero.finish_step();
        zero.step();
        const auto m = zero.memory();
        const std::int64_t psi = padded(zero.reducer().bucket_layouts());
        EXPECT_EQ(m.parameters, 2 * psi + 4 * psi / d);  // half copies + fp32 master shards
        EXPECT_EQ(m.gradients, stage == 1 ? 2 * psi : 2 * psi / d);
        EXPECT_EQ(m.optimizer_state, 8 * psi / d);
        EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state,
                  stage == 1 ? 4 * psi + 12 * psi / d : 2 * psi + 14 * psi / d);
      }
      auto model = make_mlp(3, at::kFloat);
      Zero3Options o;
      o.mixed_precision = at::kBFloat16;
      Zero3 zero(model->parameters(), kMlpUnits, group, factory(Opt::Adam), o);
      zero.zero_grad();
      zero.begin_step();
      torch::mse_loss(half_forward(*model, x, at::kBFloat16, &zero), y).backward();
      zero.finish_step();
      zero.step();
      const auto m = zero.memory();
      const std::int64_t psi = padded(zero.unit_layouts());
      EXPECT_EQ(m.parameters, 6 * psi / d);  // fp32 master + half shards; nothing gathered
      EXPECT_EQ(m.gradients, 2 * psi / d);
      EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state, 16 * psi / d);
    });
  }
}

TEST(ZeroMixedPrecision, Refusals) {
  on_ranks(2, [](const Group& group, int) {
    auto model = make_mlp(1, at::kFloat);
    const auto before = clone_params(*model);
    ZeroOptions o = small_buckets(1);
    o.mixed_precision = at::kDouble;
    EXPECT_THROW(ZeroOptimizer(model->parameters(), group, factory(Opt::Adam), o), Error);
    Zero3Options o3;
    o3.mixed_precision = at::kFloat;
    EXPECT_THROW(Zero3(model->parameters(), kMlpUnits, group, factory(Opt::Adam), o3), Error);
    auto fp64 = make_mlp(1, at::kDouble);
    o.mixed_precision = at::kBFloat16;
    try {
      ZeroOptimizer(fp64->parameters(), group, factory(Opt::Adam), o);
      ADD_FAILURE() << "fp64 parameters accepted for mixed precision";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fp32"), std::string::npos) << e.what();
    }
    const auto after = clone_params(*model);
    for (std::size_t i = 0; i < before.size(); ++i) {
      EXPECT_TRUE(torch::equal(before[i], after[i]));
      EXPECT_EQ(model->parameters()[i].scalar_type(), at::kFloat);
    }
  });
}

}  // namespace
}  // namespace chorus::train::zero_test
