// ZeRO-1 and ZeRO-2 over the dp x cp group of a model-parallel GPT (threads as ranks, fp64,
// rtol 1e-10): at tp 2 x dp 2 with sequence parallelism, cp 2 x dp 2 and tp 2 x cp 2 x dp 2,
// SGD with momentum on the shards of gradients summed over cp and averaged over dp
// (ZeroOptions::divisor), the tp partial gradients summed first, and the global norm clipped
// over the shards with the tp placements as the model holds them: every step's loss and
// gradient norm and every parameter after the last step equal those of the one-process model
// on the global batch with libtorch's SGD and clip_grad_norm_; the dp_cp group's ledger of
// every step is exactly one reduce-scatter per bucket, the norm's all-reduce and one
// all-gather per bucket.
#include <chorus/train/gpt.hpp>
#include <chorus/train/zero.hpp>

#include "../models/tiny_gpt.hpp"
#include "../reducer/reducer_test_util.hpp"

#include <torch/torch.h>

#include <map>

namespace chorus::train {
namespace {

using reducer_test::on_mesh;
using tiny_gpt::kBatch;
using tp_test::expect_close;

constexpr std::int64_t kVocab = 10;
constexpr int kSteps = 3;
constexpr double kMaxNorm = 0.5;  ///< below every step's norm: each step clips

GptConfig config(bool sp) { return tiny_gpt::config(kVocab, 29, sp); }

/// SGD with momentum: state per element, and no division by a near-zero second moment (Adam
/// turns the rounding noise of gradients that are exactly zero, the key bias's, into updates
/// of 1e-11).
std::unique_ptr<torch::optim::Optimizer> sgd(std::vector<at::Tensor> params) {
  return std::make_unique<torch::optim::SGD>(std::move(params),
                                             torch::optim::SGDOptions(0.1).momentum(0.9));
}

struct Trajectory {
  std::vector<double> losses, norms;
  std::map<std::string, at::Tensor> parameters;
};

/// One process, the whole batch: libtorch's SGD and clip_grad_norm_ (no Chorus code).
Trajectory reference_run() {
  Trajectory out;
  on_mesh(1, {}, [&out](Mesh& mesh) {
    const GptModel model(config(false), mesh.tp());
    const auto optimizer = sgd(model.parameters());
    for (int step = 0; step < kSteps; ++step) {
      optimizer->zero_grad();
      const at::Tensor loss = model.loss(tiny_gpt::tokens(kVocab), tiny_gpt::targets(kVocab));
      loss.backward();
      out.losses.push_back(loss.item<double>());
      out.norms.push_back(torch::nn::utils::clip_grad_norm_(model.parameters(), kMaxNorm));
      optimizer->step();
    }
    out.parameters = tiny_gpt::whole_parameters(model, kVocab);
  });
  return out;
}

struct Layout {
  int tp = 1, cp = 1, dp = 1;
  bool sp = false;
  int stage = 1;
  std::string describe() const {
    return "ZeRO-" + std::to_string(stage) + ", tp " + std::to_string(tp) + (sp ? " (sp)" : "") +
           " x cp " + std::to_string(cp) + " x dp " + std::to_string(dp);
  }
};

/// The dp_cp group's entries of one step.
std::vector<LedgerEntry> expected_entries(const ZeroOptimizer& zero) {
  std::vector<LedgerEntry> out;
  const auto layouts = zero.reducer().bucket_layouts();
  const std::string name = zero.reducer().group().name;
  for (const auto& b : layouts)
    out.push_back({name, CollectiveKind::ReduceScatter, std::size_t(b.padded_numel) * 8});
  out.push_back({name, CollectiveKind::AllReduce, sizeof(double)});
  for (const auto& b : layouts)
    out.push_back({name, CollectiveKind::AllGather, std::size_t(b.padded_numel) * 8});
  return out;
}

std::vector<LedgerEntry> entries_of(const std::vector<LedgerEntry>& entries,
                                    const std::string& group) {
  std::vector<LedgerEntry> out;
  for (const LedgerEntry& e : entries)
    if (e.group == group) out.push_back(e);
  return out;
}

void check_layout(const Layout& layout) {
  SCOPED_TRACE(layout.describe());
  static const Trajectory want = reference_run();
  const int world = layout.tp * layout.cp * layout.dp;
  on_mesh(world, {.dp = layout.dp, .cp = layout.cp, .tp = layout.tp}, [&](Mesh& mesh) {
    const GptModel model(config(layout.sp), mesh.tp(), mesh.cp());
    ZeroOptions options;
    options.stage = layout.stage;
    options.autograd_hooks = false;
    options.broadcast_parameters = false;
    options.divisor = layout.dp;
    ZeroOptimizer zero(model.parameters(), mesh.data_context(), sgd, options);
    std::vector<std::vector<GradPlacement>> placements;
    for (const GptParameter& p : model.named_parameters())
      placements.push_back({p.shard_dim >= 0 ? GradPlacement::Sharded : GradPlacement::Replicated});
    const std::int64_t b = kBatch / layout.dp, first = mesh.coordinates().dp * b;
    const at::Tensor tokens = tiny_gpt::tokens(kVocab).narrow(1, first, b);
    const at::Tensor targets = tiny_gpt::targets(kVocab).narrow(1, first, b);
    mesh.ledger()->take();
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      zero.zero_grad();
      zero.begin_step();
      const at::Tensor loss = model.loss(tokens, targets);
      loss.backward();
      all_reduce_partial_gradients(model.partial_gradient_parameters(), mesh.tp());
      for (const at::Tensor& p : model.parameters()) zero.mark_ready(p);
      zero.finish_step();
      const double norm = zero.clip_grad_norm(kMaxNorm, placements, {mesh.tp()});
      zero.step();
      EXPECT_GT(norm, kMaxNorm) << "the step must clip";
      expect_close(torch::tensor(norm), torch::tensor(want.norms[std::size_t(step)]), "norm");
      const at::Tensor mean = tp_test::sum_over(mesh.dp(), loss.detach()) / layout.dp;
      expect_close(mean, torch::tensor(want.losses[std::size_t(step)], at::kDouble), "loss");
      const auto got = entries_of(mesh.ledger()->take(), mesh.data_context().name);
      if (mesh.data_context().size() > 1) {
        EXPECT_EQ(got, expected_entries(zero)) << describe(got);
      }
    }
    for (const auto& [name, tensor] : tiny_gpt::whole_parameters(model, kVocab))
      expect_close(tensor, want.parameters.at(name), name);
  });
}

TEST(ZeroGpt, MatchesTheOneProcessModelWithTpAndSp) {
  for (int stage : {1, 2}) check_layout({.tp = 2, .dp = 2, .sp = true, .stage = stage});
}

TEST(ZeroGpt, MatchesTheOneProcessModelWithCp) {
  for (int stage : {1, 2}) check_layout({.cp = 2, .dp = 2, .stage = stage});
}

TEST(ZeroGpt, MatchesTheOneProcessModelAtTp2Cp2Dp2) {
  check_layout({.tp = 2, .cp = 2, .dp = 2, .sp = true, .stage = 2});
}

TEST(ZeroGpt, PlacementsMustFitTheParametersAndGroups) {
  on_mesh(2, {.dp = 2}, [](Mesh& mesh) {
    const GptModel model(config(false), mesh.tp(), mesh.cp());
    ZeroOptimizer zero(model.parameters(), mesh.data_context(), sgd);
    zero.begin_step();
    for (const at::Tensor& p : model.parameters()) zero.mark_ready(p);
    zero.finish_step();
    const std::size_t n = model.parameters().size();
    try {
      zero.clip_grad_norm(1.0, std::vector<std::vector<GradPlacement>>(n - 1), {});
      ADD_FAILURE() << "accepted too few placements";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(n - 1) + " placements for " +
                                           std::to_string(n) + " parameters"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace chorus::train
