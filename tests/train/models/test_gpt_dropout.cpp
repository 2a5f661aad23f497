// The GPT's dropout masks, recomputation and deferred weight gradients (threads as ranks, fp64,
// tp 1-4): a rank's masks are slices of the degree-1 masks; recomputation gives the gradients
// of the model without it; deferred weight gradients, once computed, equal the plain ones.
// The equivalence with the one-process model under dropout and recomputation is test_gpt.cpp.
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/random.hpp>

#include "../tensor_parallel/tp_test_util.hpp"
#include "tiny_gpt.hpp"
#include "train/models/gpt_dropout.hpp"

namespace chorus::train {
namespace {

using namespace tp_test;
using detail::DropoutPlan, detail::GptDropoutSite;

constexpr std::int64_t kVocab = 10;
constexpr double kP = 0.3;

// Masks applied to ones are the masks. At degree t rank r holds heads [r·a/t, (r+1)·a/t) of
// the attention probabilities and, under sequence parallelism, rows [r·s/t, (r+1)·s/t) of the
// hidden state; a data-parallel replica holds samples from its first_sample on.
TEST(GptDropout, MasksAtDegreeTAreSlicesOfTheDegreeOneMasks) {
  run([](const Group&, int r, int t) {
    const std::int64_t b = 2, a = 12, s = 12, h = 8;
    const DropoutPlan plan{.p = kP, .seed = 5, .step = 3, .micro_batch = 1, .first_sample = 4};
    const DropoutPlan whole_batch{.p = kP, .seed = 5, .step = 3, .micro_batch = 1};
    const at::Tensor probabilities =
        detail::attention_dropout(at::ones({b, a / t, s, s}, at::kDouble), plan, 1, r * a / t, a);
    const at::Tensor full =
        detail::attention_dropout(at::ones({b + 4, a, s, s}, at::kDouble), whole_batch, 1, 0, a);
    EXPECT_TRUE(at::equal(probabilities, full.narrow(0, 4, b).narrow(1, r * a / t, a / t)));
    EXPECT_GT((full == 0).sum().item<std::int64_t>(), 0) << "some dropped";

    const at::Tensor rows = detail::hidden_dropout(at::ones({s / t, b, h}, at::kDouble), plan, 1,
                                                   GptDropoutSite::MlpOutput, {r * s / t, s});
    const at::Tensor all_rows = detail::hidden_dropout(
        at::ones({s, b + 4, h}, at::kDouble), whole_batch, 1, GptDropoutSite::MlpOutput, {0, s});
    EXPECT_TRUE(at::equal(rows, all_rows.narrow(1, 4, b).narrow(0, r * s / t, s / t)));
    const at::Tensor other_site =
        detail::hidden_dropout(at::ones({s, b + 4, h}, at::kDouble), whole_batch, 1,
                               GptDropoutSite::AttentionOutput, {0, s});
    EXPECT_FALSE(at::equal(other_site, all_rows)) << "sites draw different masks";
  });
}

/// The loss and every local gradient of `model` for step `step` (gradients zeroed first).
std::vector<at::Tensor> gradients(GptModel& model, std::uint64_t step) {
  for (const at::Tensor& p : model.parameters()) p.mutable_grad() = at::Tensor();
  model.set_step({.step = step});
  const at::Tensor loss = model.loss(tiny_gpt::tokens(kVocab), tiny_gpt::targets(kVocab));
  loss.backward();
  std::vector<at::Tensor> out{loss.detach()};
  for (const at::Tensor& p : model.parameters()) out.push_back(p.grad());
  return out;
}

GptConfig config(bool sp, Recompute recompute, bool defer = false) {
  GptConfig c = tiny_gpt::config(kVocab, 3, sp);
  c.dropout = kP;
  c.recompute = recompute;
  c.defer_weight_gradients = defer;
  return c;
}

// Recomputation runs the same operations on the same values: the gradients are bit-equal.
TEST(GptRecomputation, GivesTheGradientsOfNoRecomputation) {
  run([](const Group& g, int, int) {
    for (bool sp : {false, true}) {
      GptModel none(config(sp, Recompute::None), g);
      const std::vector<at::Tensor> expected = gradients(none, 7);
      for (Recompute r : {Recompute::Selective, Recompute::Full}) {
        SCOPED_TRACE(std::string(sp ? "sp, " : "") + (r == Recompute::Full ? "full" : "selective"));
        GptModel model(config(sp, r), g);
        const std::vector<at::Tensor> got = gradients(model, 7);
        for (std::size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(at::equal(got[i], expected[i])) << "tensor " << i;
      }
    }
  });
}

// The model's deferred weight gradients, computed after backward, equal the plain gradients,
// also under full recomputation (whose backward differentiates a recomputed graph).
TEST(GptDeferredWeightGradients, EqualThePlainGradients) {
  run([](const Group& g, int, int) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      GptModel plain(config(true, r), g), deferred(config(true, r, true), g);
      const std::vector<at::Tensor> expected = gradients(plain, 2);
      deferred.set_step({.step = 2});
      deferred.loss(tiny_gpt::tokens(kVocab), tiny_gpt::targets(kVocab)).backward();
      EXPECT_EQ(deferred.pending_weight_gradients(), 4u * tiny_gpt::kLayers);
      const std::vector<GptParameter> params = deferred.named_parameters();
      EXPECT_FALSE(params[4].tensor.grad().defined()) << params[4].name;
      EXPECT_EQ(deferred.compute_weight_gradients(), 4u * tiny_gpt::kLayers);
      EXPECT_EQ(deferred.pending_weight_gradients(), 0u);
      for (std::size_t i = 0; i < params.size(); ++i)
        expect_close(params[i].tensor.grad(), expected[i + 1], params[i].name, 1e-12);
    }
  });
}

// Evaluation draws no masks: the loss is that of the model without dropout; the step decides
// the masks while training.
TEST(GptDropout, OnlyWhileTrainingAndPerStep) {
  run([](const Group& g, int, int) {
    GptModel dropped(config(false, Recompute::None), g);
    GptModel plain(tiny_gpt::config(kVocab, 3, false), g);
    const auto loss = [](GptModel& m) {
      return m.loss(tiny_gpt::tokens(kVocab), tiny_gpt::targets(kVocab)).item<double>();
    };
    const double training = loss(dropped);
    dropped.set_step({.step = 1});
    EXPECT_NE(loss(dropped), training);
    dropped.set_training(false);
    EXPECT_FALSE(dropped.training());
    EXPECT_EQ(loss(dropped), loss(plain));
    EXPECT_NE(training, loss(plain));
  });
}

TEST(GptDropout, BadProbabilityIsASentence) {
  run([](const Group& g, int, int t) {
    if (t != 1) return;
    GptConfig c = tiny_gpt::config(kVocab, 3, false);
    for (const auto& [p, text] : {std::pair{-0.1, "-0.1"}, std::pair{1.0, "1"}}) {
      c.dropout = p;
      try {
        GptModel model(c, g);
        ADD_FAILURE() << "constructed with dropout " << p;
      } catch (const Error& e) {
        EXPECT_EQ(e.what(), std::string("GptModel: dropout ") + text + " is outside [0, 1)");
      }
    }
  });
}

}  // namespace
}  // namespace chorus::train
