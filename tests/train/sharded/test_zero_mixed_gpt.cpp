// ZeRO-1/2/3 with bf16 mixed precision on the GPT model (threads as ranks): the parameters
// computed, reduced and gathered in bf16, the loss in fp32 (vocab_parallel_cross_entropy
// upcasts half logits), the optimizer stepping fp32 master shards.
// - At dp 1 every stage is bit-equal to a plain one-process mixed-precision loop (fp32 masters,
//   the model's parameters their bf16 copies, the bf16 gradients upcast for the step).
// - At dp 2 every stage stays within kTolerance of the fp32 one-process model after kSteps
//   SGD-momentum steps (docs/parallel.md, "Mixed precision").
// - Memory per rank equals PARALLEL.md section 3's mixed-precision lines (Adam, K = 12).
// - Saved in the GPT checkpoint layout (the fp32 masters) and resumed at dp 2, every stage
//   continues bit-equal to the uninterrupted run: masters, bf16 parameters, optimizer state.
#include "zero3_test_util.hpp"

#include "../checkpoint_test_util.hpp"
#include "mixed_test_util.hpp"

#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/sharded_checkpoint.hpp>

namespace chorus::train::zero_test {
namespace {

constexpr int kSteps = 4;
/// Relative to each tensor's largest element: bf16 keeps 8 bits, and the GPT's activations
/// (embedding, residual stream, attention, MLP) are all bf16, not only its matrix products; a
/// bias whose elements stay below 0.1 drifts by up to 8% of its largest (measured).
constexpr double kTolerance = 1e-1;

/// The model's parameters (bf16 under mixed precision), copied.
std::vector<at::Tensor> params_of(const GptModel& model) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

GptConfig fp32_config() {
  GptConfig c = gpt_config();
  c.dtype = at::kFloat;
  return c;
}

at::Tensor tokens(int step, std::int64_t mul, std::int64_t add, int rank, int ranks) {
  const std::int64_t cols = kGptBatch / ranks;
  return gpt_tokens(static_cast<std::size_t>(step), mul, add).narrow(1, rank * cols, cols);
}

/// One process, plainly: fp32 masters, the model's parameters their bf16 copies, the bf16
/// gradients upcast for the optimizer's step and its result rounded back.
std::vector<at::Tensor> mixed_reference(Opt o) {
  std::vector<at::Tensor> out;
  on_ranks(1, [&](const Group& group, int) {
    GptModel model(fp32_config(), Group{group.comm, "tp", nullptr});
    const std::vector<at::Tensor> params = model.parameters();
    std::vector<at::Tensor> masters;
    for (const at::Tensor& p : params) {
      masters.push_back(p.detach().clone().requires_grad_());
      at::Tensor(p).set_data(p.detach().to(at::kBFloat16));
    }
    auto opt = make_optimizer(o, masters);
    for (int s = 0; s < kSteps; ++s) {
      for (const at::Tensor& p : params) at::Tensor(p).mutable_grad() = at::Tensor();
      model.loss(tokens(s, 7, 3, 0, 1), tokens(s, 5, 1, 0, 1)).backward();
      for (std::size_t i = 0; i < params.size(); ++i) {
        masters[i].mutable_grad() = params[i].grad().to(at::kFloat);
      }
      opt->step();
      at::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(masters[i]);
    }
    for (const at::Tensor& m : masters) out.push_back(m.detach().clone());
  });
  return out;
}

/// The fp32 one-process model after kSteps.
std::vector<at::Tensor> fp32_reference(Opt o) {
  std::vector<at::Tensor> out;
  on_ranks(1, [&](const Group& group, int) {
    GptModel model(fp32_config(), Group{group.comm, "tp", nullptr});
    auto opt = make_optimizer(o, model.parameters());
    for (int s = 0; s < kSteps; ++s) {
      opt->zero_grad();
      model.loss(tokens(s, 7, 3, 0, 1), tokens(s, 5, 1, 0, 1)).backward();
      opt->step();
    }
    for (const at::Tensor& p : model.parameters()) out.push_back(p.detach().clone());
  });
  return out;
}

/// Steps [seg.from, seg.to) at dp `ranks` under ZeRO-`stage` with bf16, resuming from seg.load
/// and saving to seg.save when given (the GPT's states: the load fills the fp32 master shards,
/// refresh_from_shards makes the bf16 parameters of them); every rank's state after.
std::vector<RankState> run_mixed(int stage, Opt o, int ranks, const Segment& seg) {
  std::vector<RankState> result(static_cast<std::size_t>(ranks));
  on_ranks(ranks, [&](const Group& group, int rank) {
    Communicator comm = group.comm;
    const Group tp{comm.split(rank, 0), "tp", nullptr};
    GptModel model(fp32_config(), tp);
    std::unique_ptr<ZeroOptimizer> zero;
    std::unique_ptr<Zero3> zero3;
    ShardedState state;
    if (stage == 3) {
      Zero3Options options;
      options.mixed_precision = at::kBFloat16;
      zero3 =
          std::make_unique<Zero3>(model.parameters(), gpt_units(model), group, factory(o), options);
      state = gpt_zero3_state(model, *zero3);
    } else {
      ZeroOptions options = small_buckets(stage);
      options.mixed_precision = at::kBFloat16;
      zero = std::make_unique<ZeroOptimizer>(model.parameters(), group, factory(o), options);
      state = gpt_zero_state(model.named_parameters(), model.config(), tp, *zero);
    }
    const RunConfig description = gpt_model_description(model.config());
    if (!seg.load.empty()) {
      EXPECT_EQ(load_sharded_checkpoint(seg.load, description, state).step, seg.from);
      if (zero3) zero3->refresh_from_shards();
      if (zero) zero->refresh_from_shards();
    }
    for (int s = seg.from; s < seg.to; ++s) {
      const at::Tensor x = tokens(s, 7, 3, rank, ranks), y = tokens(s, 5, 1, rank, ranks);
      if (zero3) {
        zero3->zero_grad();
        zero3->begin_step();
        gpt_loss(model, *zero3, x, y).backward();
        zero3->finish_step();
        zero3->step();
      } else {
        zero->zero_grad();
        zero->begin_step();
        model.loss(x, y).backward();
        zero->finish_step();
        zero->step();
      }
    }
    if (!seg.save.empty())
      save_sharded_checkpoint(seg.save, description, state, {seg.to, 0, {}, {}}, comm);
    result[static_cast<std::size_t>(rank)] =
        zero3 ? rank_state(*zero3, zero3->full_parameters()) : rank_state(*zero, params_of(model));
  });
  return result;
}

/// kSteps at dp `ranks` under ZeRO-`stage` with bf16: rank 0's fp32 masters, whole.
std::vector<at::Tensor> run_mixed(int stage, Opt o, int ranks) {
  return run_mixed(stage, o, ranks, {0, kSteps, "", ""}).front().masters;
}

TEST(ZeroMixedPrecisionGpt, OneRankEqualsThePlainMixedLoop) {
  for (Opt o : {Opt::SgdMomentum, Opt::Adam}) {
    const auto want = mixed_reference(o);
    for (int stage : {1, 2, 3}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(stage) + ", " + name(o));
      const auto got = run_mixed(stage, o, 1);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
      }
    }
  }
}

TEST(ZeroMixedPrecisionGpt, EveryStageWithinTheToleranceOfFp32) {
  const auto fp32 = fp32_reference(Opt::SgdMomentum);
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(stage) + " at dp 2");
    const auto got = run_mixed(stage, Opt::SgdMomentum, 2);
    ASSERT_EQ(got.size(), fp32.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      expect_close(got[i], fp32[i], "parameter " + std::to_string(i), kTolerance);
    }
  }
}

// Saved after 2 of kSteps Adam steps at dp 2 and resumed at dp 2: every rank's masters, bf16
// parameters, master shards and Adam state bit-equal to the uninterrupted run's.
TEST(ZeroMixedPrecisionGpt, ResumedRunEqualsTheUninterruptedOne) {
  const chorus::testing::TempDir dir("zero_mixed_gpt_resume");
  constexpr int kSaveAt = 2;
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(stage) + " at dp 2");
    const std::string ck = dir.file("ck" + std::to_string(stage));
    const std::vector<RankState> whole = run_mixed(stage, Opt::Adam, 2, {0, kSteps, "", ""});
    run_mixed(stage, Opt::Adam, 2, {0, kSaveAt, "", ck});
    const std::vector<RankState> resumed =
        run_mixed(stage, Opt::Adam, 2, {kSaveAt, kSteps, ck, ""});
    for (std::size_t r = 0; r < whole.size(); ++r) {
      expect_same_state(resumed[r], whole[r], "rank " + std::to_string(r));
    }
  }
}

// One bf16 Adam step at dp 2, then the bytes against PARALLEL.md's mixed-precision lines.
TEST(ZeroMixedPrecisionGpt, MemoryMatchesTheMixedPrecisionFormulas) {
  on_ranks(2, [](const Group& group, int rank) {
    Communicator comm = group.comm;
    const Group tp{comm.split(rank, 0), "tp", nullptr};
    const std::int64_t d = group.size();
    const at::Tensor x = tokens(0, 7, 3, rank, 2), y = tokens(0, 5, 1, rank, 2);
    for (int stage : {1, 2}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(stage));
      GptModel model(fp32_config(), tp);
      ZeroOptions o = small_buckets(stage);
      o.mixed_precision = at::kBFloat16;
      ZeroOptimizer zero(model.parameters(), group, factory(Opt::Adam), o);
      zero.zero_grad();
      zero.begin_step();
      model.loss(x, y).backward();
      zero.finish_step();
      zero.step();
      const auto m = zero.memory();
      const std::int64_t psi = padded(zero.reducer().bucket_layouts());
      EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state,
                stage == 1 ? 4 * psi + 12 * psi / d : 2 * psi + 14 * psi / d);
    }
    GptModel model(fp32_config(), tp);
    Zero3Options o;
    o.mixed_precision = at::kBFloat16;
    Zero3 zero(model.parameters(), gpt_units(model), group, factory(Opt::Adam), o);
    zero.zero_grad();
    zero.begin_step();
    gpt_loss(model, zero, x, y).backward();
    zero.finish_step();
    zero.step();
    const auto m = zero.memory();
    const std::int64_t psi = padded(zero.unit_layouts());
    EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state, 16 * psi / d);
  });
}

}  // namespace
}  // namespace chorus::train::zero_test
