// The GPT with mixture-of-experts MLPs (threads as ranks, fp64) against the same model in one
// process on the same global batch: at ep 1, 2 and 4, with dp > ep and with tp 2 for the
// attention, dropless and with capacity (top-2, every block and every other block). Each step
// first asserts that every MoE block kept the same (token, expert) assignments as the one
// process (so the same tokens were dropped), then the loss; after five SGD steps every
// parameter (rtol 1e-10). Gradients: experts summed over the expert-data-parallel group and
// the rest over dp, both divided by dp. A checkpoint saved at ep 2 loads at ep 1 and ep 4 bit
// for bit; refused configurations are sentences.
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/reducer.hpp>

#include "../checkpoint_test_util.hpp"
#include "../models/tiny_gpt.hpp"
#include "../reducer/reducer_test_util.hpp"
#include "../tensor_parallel/tp_test_util.hpp"

#include <map>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

using reducer_test::on_mesh;
using tp_test::expect_close, tp_test::reassembled, tp_test::sum_over;

constexpr std::int64_t kVocab = 10, kSeq = 12, kBatch = 4, kExperts = 4;
constexpr double kLearningRate = 0.5;
constexpr int kSteps = 5;

GptConfig config(bool dropless, std::int64_t every) {
  GptConfig c{.layers = 2,
              .hidden = 12,
              .heads = 4,
              .vocab = kVocab,
              .sequence = kSeq,
              .seed = 41,
              .init_std = 0.3,
              .dtype = at::kDouble};
  c.moe = {.experts = kExperts,
           .every = every,
           .ffn = 10,
           .routing = {.top_k = 2, .capacity_factor = 1.0, .dropless = dropless},
           .aux_loss_coef = 0.05,
           .z_loss_coef = 1e-3};
  return c;
}

at::Tensor tokens() {
  return (at::arange(kSeq * kBatch, at::kLong) * 7 + 3).remainder(kVocab).view({kSeq, kBatch});
}
at::Tensor targets() {
  return (at::arange(kSeq * kBatch, at::kLong) * 5 + 1).remainder(kVocab).view({kSeq, kBatch});
}

/// The kept assignments of each MoE block as sorted keys (global token)·E + expert; a rank's
/// tokens are the global ones from `first_token` on (sample-major).
std::vector<at::Tensor> routing_keys(const GptModel& model, std::int64_t first_token) {
  std::vector<at::Tensor> out;
  for (const MoeLayer* layer : model.moe_layers()) {
    const MoeStats& s = layer->last_stats();
    out.push_back(std::get<0>(at::sort((s.token + first_token) * kExperts + s.expert)));
  }
  return out;
}

struct Trajectory {
  std::vector<std::vector<at::Tensor>> routing;  ///< per step, per MoE block
  std::vector<at::Tensor> losses;
  std::map<std::string, at::Tensor> parameters;
};

void sgd_step(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    p.sub_(p.grad() * kLearningRate);
    p.mutable_grad().zero_();
  }
}

/// This rank's parameters, tp shards reassembled, the embedding's padded rows dropped.
std::map<std::string, at::Tensor> whole_parameters(const GptModel& model) {
  return tiny_gpt::whole_parameters(model, kVocab);
}

Trajectory reference_run(const GptConfig& c) {
  Trajectory out;
  on_mesh(1, {}, [&](Mesh& mesh) {
    GptModel model(c, mesh.tp(), mesh.cp(), mesh.expert());
    for (int step = 0; step < kSteps; ++step) {
      const at::Tensor loss = model.loss(tokens(), targets());
      out.routing.push_back(routing_keys(model, 0));
      loss.backward();
      out.losses.push_back(loss.detach());
      sgd_step(model.parameters());
    }
    out.parameters = whole_parameters(model);
  });
  return out;
}

struct Layout {
  int dp = 1, ep = 1, tp = 1;
  std::string describe() const {
    return "dp " + std::to_string(dp) + " ep " + std::to_string(ep) + " tp " + std::to_string(tp);
  }
};

/// The parameters a reducer over `group` reduces: the experts (by name) or the rest.
std::vector<at::Tensor> parameters_of(const GptModel& model, bool experts) {
  std::vector<at::Tensor> out;
  for (const GptParameter& p : model.named_parameters())
    if ((p.name.find(".moe.experts.") != std::string::npos) == experts) out.push_back(p.tensor);
  return out;
}

/// Trains `c` at `layout` against `want`; saves the result at `checkpoint` when not empty.
void check_layout(const GptConfig& c, const Trajectory& want, const Layout& layout,
                  const std::string& checkpoint = "") {
  SCOPED_TRACE(layout.describe());
  on_mesh(layout.dp * layout.tp, {.dp = layout.dp, .tp = layout.tp, .ep = layout.ep},
          [&](Mesh& mesh) {
            GptModel model(c, mesh.tp(), mesh.cp(), mesh.expert());
            ReducerOptions options;
            options.divisor = layout.dp;
            GradientReducer dense(parameters_of(model, false), mesh.data_context(), options);
            GradientReducer experts(parameters_of(model, true), mesh.expert_data(), options);
            const std::int64_t b = kBatch / layout.dp, d = mesh.coordinates().dp;
            const at::Tensor x = tokens().narrow(1, d * b, b), y = targets().narrow(1, d * b, b);
            for (int step = 0; step < kSteps; ++step) {
              SCOPED_TRACE("step " + std::to_string(step));
              const at::Tensor loss = model.loss(x, y);
              const std::vector<at::Tensor> keys = routing_keys(model, d * b * kSeq);
              const auto& all = want.routing[static_cast<std::size_t>(step)];
              ASSERT_EQ(keys.size(), all.size());
              for (std::size_t l = 0; l < keys.size(); ++l) {
                const at::Tensor token = all[l].div(kExperts, "floor");
                const at::Tensor mine =
                    all[l].masked_select(token.ge(d * b * kSeq) & token.lt((d + 1) * b * kSeq));
                ASSERT_TRUE(at::equal(keys[l], mine)) << "routing of MoE block " << l;
              }
              dense.begin_step();
              experts.begin_step();
              loss.backward();
              dense.finish_step();
              experts.finish_step();
              expect_close(sum_over(mesh.dp(), loss.detach()) / layout.dp,
                           want.losses[static_cast<std::size_t>(step)], "loss");
              sgd_step(model.parameters());
            }
            for (const auto& [name, tensor] : whole_parameters(model))
              expect_close(tensor, want.parameters.at(name), name);
            if (!checkpoint.empty()) save_gpt_checkpoint(checkpoint, model, {}, mesh.world());
          });
}

void check_layouts(const GptConfig& c) {
  const Trajectory want = reference_run(c);
  for (const Layout& layout :
       {Layout{.dp = 1, .ep = 1}, Layout{.dp = 2, .ep = 2}, Layout{.dp = 4, .ep = 4},
        Layout{.dp = 4, .ep = 2}, Layout{.dp = 2, .ep = 2, .tp = 2}})
    check_layout(c, want, layout);
}

TEST(MoeGpt, DroplessMatchesTheOneProcessModelAtEp1To4) { check_layouts(config(true, 1)); }

TEST(MoeGpt, WithCapacityMatchesTheOneProcessModelAtEp1To4) { check_layouts(config(false, 2)); }

TEST(MoeGpt, WithCapacityDropsTokens) {
  on_mesh(1, {}, [](Mesh& mesh) {
    GptModel model(config(false, 1), mesh.tp(), mesh.cp(), mesh.expert());
    model.loss(tokens(), targets()).backward();
    const GptMoeCounters counters = model.take_moe_counters();
    EXPECT_EQ(counters.layer_forwards, 2);
    EXPECT_EQ(counters.assignments, 2 * kSeq * kBatch * 2);
    EXPECT_GT(counters.dropped, 0) << "the test's capacity must drop some tokens";
    std::int64_t kept = 0;
    for (std::int64_t n : counters.kept) kept += n;
    EXPECT_EQ(kept + counters.dropped, counters.assignments);
    EXPECT_EQ(model.take_moe_counters().layer_forwards, 0);
  });
}

/// The objective: the cross-entropy plus every MoE block's aux and z losses.
double objective(GptModel& model) {
  model.take_moe_counters();
  const double loss = model.loss(tokens(), targets()).item<double>();
  const GptMoeCounters counters = model.take_moe_counters();
  return loss + counters.aux_loss + counters.z_loss;
}

// The gradient backward leaves is that of the cross-entropy plus the MoE losses: its product
// with a direction equals the objective's central difference along it.
TEST(MoeGpt, TheMoeLossesEnterTheGradient) {
  on_mesh(1, {}, [](Mesh& mesh) {
    GptModel model(config(false, 1), mesh.tp(), mesh.cp(), mesh.expert());
    model.loss(tokens(), targets()).backward();
    const std::vector<at::Tensor> params = model.parameters();
    std::vector<at::Tensor> direction;
    double slope = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      direction.push_back(tp_test::filled(params[i].sizes(), 0.1 * static_cast<double>(i)));
      slope += (params[i].grad() * direction.back()).sum().item<double>();
    }
    const auto moved = [&](double step) {
      at::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i) params[i].add_(direction[i] * step);
    };
    constexpr double kStep = 1e-6;
    moved(kStep);
    const double up = objective(model);
    moved(-2 * kStep);
    const double down = objective(model);
    EXPECT_NEAR((up - down) / (2 * kStep), slope, 1e-6 * std::abs(slope));
  });
}

// Experts are saved one tensor per logical expert index, so the ep 2 checkpoint holds all of
// them, whichever rank held each, and loads into one process and at ep 4.
TEST(MoeGpt, ACheckpointSavedAtEp2LoadsAtEp1AndEp4) {
  chorus::testing::TempDir dir("moe_gpt");
  const std::string path = dir.file("ck");
  const GptConfig c = config(true, 1);
  const Trajectory want = reference_run(c);
  check_layout(c, want, {.dp = 2, .ep = 2}, path);
  for (const MeshDegrees degrees : {MeshDegrees{.dp = 1}, MeshDegrees{.dp = 4, .ep = 4}}) {
    on_mesh(degrees.dp, degrees, [&](Mesh& mesh) {
      GptModel model(c, mesh.tp(), mesh.cp(), mesh.expert());
      load_gpt_checkpoint(path, model);
      for (const auto& [name, tensor] : whole_parameters(model))
        expect_close(tensor, want.parameters.at(name), name);
    });
  }
}

void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error: expected " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(MoeGpt, RefusedConfigurationsAreSentences) {
  on_mesh(1, {}, [](Mesh& mesh) {
    GptConfig c = config(true, 1);
    c.moe.experts = 1;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp(), mesh.expert()); },
                 "MoE: top_k 2 exceeds the number of experts 1");
  });
  on_mesh(2, {.dp = 2, .ep = 2}, [](Mesh& mesh) {
    GptConfig c = config(true, 1);
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp()); },
                 "GptModel: MoE blocks need the expert group (the constructor with ep)");
    c.moe.experts = 3;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp(), mesh.expert()); },
                 "MoeLayer: 3 experts are not a multiple of the ep group's 2 ranks");
    c = config(false, 1);
    c.moe.routing.capacity_factor = 0;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp(), mesh.expert()); },
                 "MoE: capacity factor 0 is not positive (use dropless for no capacity)");
    c = config(true, 1);
    c.sequence_parallel = true;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp(), mesh.expert()); },
                 "GptModel: MoE blocks do not run under sequence parallelism");
    c = config(true, 1);
    c.recompute = Recompute::Full;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp(), mesh.expert()); },
                 "GptModel: MoE blocks do not run under full recomputation (selective does)");
  });
}

}  // namespace
}  // namespace chorus::train
