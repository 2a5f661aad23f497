// The GPT model at tp 1-4, with and without sequence parallelism, against a plain torch
// implementation of the same model in one process (threads as ranks, fp64): the loss, every
// parameter's gradient reassembled from the shards, two SGD steps, and the ledger's exact count
// of collectives per forward and backward (PARALLEL.md section 2).
#include <chorus/train/gpt.hpp>
#include <chorus/train/random.hpp>

#include "../tensor_parallel/tp_test_util.hpp"
#include "tiny_gpt.hpp"

#include <cmath>
#include <limits>
#include <map>

namespace chorus::train {
namespace {

using namespace tp_test;

using tiny_gpt::kBatch, tiny_gpt::kHeads, tiny_gpt::kHidden, tiny_gpt::kLayers, tiny_gpt::kSeq,
    tiny_gpt::kStd;

// A vocabulary of 10 is padded at t 3 and 4.
constexpr std::int64_t kVocab = 10;
constexpr double kLearningRate = 0.5;

GptConfig config(bool sp) { return tiny_gpt::config(kVocab, 17, sp); }

at::Tensor tokens() { return tiny_gpt::tokens(kVocab); }
at::Tensor targets() { return tiny_gpt::targets(kVocab); }

using Parameters = std::map<std::string, at::Tensor>;

/// The degree-1 model's full parameters, from init_slice with the model's names and scales.
Parameters reference_parameters() {
  Parameters p;
  const auto add = [&p](const std::string& name, std::vector<std::int64_t> shape, InitKind kind,
                        double scale) {
    p[name] =
        init_slice({.seed = 17, .name = name, .kind = kind, .scale = scale, .dtype = at::kDouble},
                   shape)
            .requires_grad_();
  };
  const auto norm = [&add](const std::string& name) {
    add(name + ".weight", {kHidden}, InitKind::Constant, 1.0);
    add(name + ".bias", {kHidden}, InitKind::Constant, 0.0);
  };
  const auto linear = [&add](const std::string& name, std::int64_t out, std::int64_t in,
                             double std) {
    add(name + ".weight", {out, in}, InitKind::Normal, std);
    add(name + ".bias", {out}, InitKind::Constant, 0.0);
  };
  add("embedding.weight", {kVocab, kHidden}, InitKind::Normal, kStd);
  add("position_embedding.weight", {kSeq, kHidden}, InitKind::Normal, kStd);
  const double output_std = kStd / std::sqrt(2.0 * kLayers);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    const std::string layer = "layers." + std::to_string(l);
    norm(layer + ".input_norm");
    linear(layer + ".attention.qkv", 3 * kHidden, kHidden, kStd);
    linear(layer + ".attention.proj", kHidden, kHidden, output_std);
    norm(layer + ".post_attention_norm");
    linear(layer + ".mlp.fc1", 4 * kHidden, kHidden, kStd);
    linear(layer + ".mlp.fc2", kHidden, 4 * kHidden, output_std);
  }
  norm("final_norm");
  return p;
}

/// Causal self-attention of [s, b, h] with the fused weight's rows ordered (head, q|k|v, d).
at::Tensor reference_attention(Parameters& p, const std::string& layer, const at::Tensor& x) {
  const std::int64_t d = kHidden / kHeads;
  const at::Tensor qkv =
      at::linear(x, p[layer + ".weight"], p[layer + ".bias"]).view({kSeq, kBatch, kHeads, 3, d});
  const auto part = [&](int i) { return qkv.select(3, i).permute({1, 2, 0, 3}); };  // [b, a, s, d]
  const at::Tensor mask =
      at::full({kSeq, kSeq}, -std::numeric_limits<double>::infinity(), at::kDouble).triu(1);
  const at::Tensor probabilities =
      at::softmax(at::matmul(part(0), part(1).transpose(-2, -1)) / std::sqrt(double(d)) + mask, -1);
  return at::matmul(probabilities, part(2)).permute({2, 0, 1, 3}).reshape({kSeq, kBatch, kHidden});
}

at::Tensor reference_loss(Parameters& p) {
  const auto norm = [&p](const std::string& name, const at::Tensor& x) {
    return at::layer_norm(x, {kHidden}, p[name + ".weight"], p[name + ".bias"], 1e-5);
  };
  const auto linear = [&p](const std::string& name, const at::Tensor& x) {
    return at::linear(x, p[name + ".weight"], p[name + ".bias"]);
  };
  at::Tensor x =
      at::embedding(p["embedding.weight"], tokens()) + p["position_embedding.weight"].unsqueeze(1);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    const std::string layer = "layers." + std::to_string(l);
    const at::Tensor context =
        reference_attention(p, layer + ".attention.qkv", norm(layer + ".input_norm", x));
    x = x + linear(layer + ".attention.proj", context);
    x = x + linear(layer + ".mlp.fc2",
                   at::gelu(linear(layer + ".mlp.fc1", norm(layer + ".post_attention_norm", x))));
  }
  const at::Tensor logits = at::linear(norm("final_norm", x), p["embedding.weight"]);
  return at::nll_loss(at::log_softmax(logits.view({-1, kVocab}), -1), targets().view({-1}));
}

/// Every parameter (or its gradient), reassembled from the ranks' shards, equals the reference.
void expect_matches(const Group& g, const GptModel& model, Parameters& reference, bool gradients) {
  for (const GptParameter& p : model.named_parameters()) {
    const std::string what = p.name + (gradients ? " gradient" : "");
    const at::Tensor local = gradients ? p.tensor.grad() : p.tensor.detach();
    ASSERT_TRUE(local.defined()) << what;
    at::Tensor full = p.shard_dim < 0 ? local : reassembled(g, local, p.shard_dim);
    if (p.name == "embedding.weight") {
      EXPECT_EQ(full.narrow(0, kVocab, full.size(0) - kVocab).count_nonzero().item<int>(), 0)
          << what << ": padded rows";
      full = full.narrow(0, 0, kVocab);
    }
    const at::Tensor& ref = reference.at(p.name);
    expect_close(full, gradients ? ref.grad() : ref.detach(), what);
  }
}

void sgd_step(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    p.sub_(p.grad() * kLearningRate);
    p.mutable_grad().zero_();
  }
}

using K = CollectiveKind;

/// The ledger's totals since the last call are `expected` (nothing on a group of one).
void expect_totals(const Group& g, LedgerTotals expected, const std::string& what) {
  if (g.size() == 1) expected.clear();
  const std::vector<LedgerEntry> entries = g.ledger->take();
  CollectiveLedger got;
  got.enable();
  for (const LedgerEntry& e : entries) got.record(e.group, e.kind, e.bytes);
  EXPECT_EQ(got.totals(), expected) << what << ": got " << describe(entries);
}

LedgerTotal times(std::size_t calls, std::size_t bytes) { return {calls, calls * bytes}; }

// One forward + backward, per PARALLEL.md section 2, with act = b·s·h and tok = b·s elements:
//   tensor parallelism: forward 1 all-reduce of act per row-parallel layer (2 per block) and
//   1 for the embedding, 3 of tok in the cross-entropy; backward 1 of act per column-parallel
//   layer (2 per block) and 1 for the tied logits' input: 2L + 1 of act and 3 of tok forward,
//   2L + 1 of act backward.
//   sequence parallelism: each all-reduce of act becomes a reduce-scatter forward (the
//   row-parallel layers, the embedding: 2L + 1) or an all-gather (the column-parallel inputs,
//   the logits' input: 2L + 1), and backward runs each adjoint once: 2L + 1 all-gathers and
//   2L + 1 reduce-scatters of act forward and the same backward; the 3 all-reduces of tok stay.
//   Then the partial gradients (LayerNorms, row-parallel biases, position embedding) are
//   summed in one all-reduce of their concatenation.
void check_model(bool sp) {
  run([sp](const Group& g, int, int) {
    const GptModel model(config(sp), g);
    expect_totals(g, {}, "construction");
    Parameters reference = reference_parameters();
    std::vector<at::Tensor> reference_list;
    for (auto& [name, t] : reference) reference_list.push_back(t);
    const std::size_t act = kBatch * kSeq * kHidden * sizeof(double);
    const std::size_t tok = kBatch * kSeq * sizeof(double);
    const std::size_t blocks = 2 * kLayers + 1;
    std::size_t partial_bytes = 0;
    for (const at::Tensor& p : model.partial_gradient_parameters())
      partial_bytes += p.numel() * sizeof(double);
    EXPECT_EQ(partial_bytes, sp ? (kSeq * kHidden + kLayers * 6 * kHidden + 2 * kHidden) * 8 : 0);

    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const at::Tensor loss = model.loss(tokens(), targets());
      const LedgerTotal reductions = times(3, tok);
      expect_totals(
          g,
          sp ? LedgerTotals{{{"tp", K::AllGather}, times(blocks, act)},
                            {{"tp", K::ReduceScatter}, times(blocks, act)},
                            {{"tp", K::AllReduce}, reductions}}
             : LedgerTotals{{{"tp", K::AllReduce}, {blocks + 3, blocks * act + reductions.bytes}}},
          "forward");
      loss.backward();
      expect_totals(g,
                    sp ? LedgerTotals{{{"tp", K::AllGather}, times(blocks, act)},
                                      {{"tp", K::ReduceScatter}, times(blocks, act)}}
                       : LedgerTotals{{{"tp", K::AllReduce}, times(blocks, act)}},
                    "backward");
      all_reduce_partial_gradients(model.partial_gradient_parameters(), g);
      expect_totals(
          g, sp ? LedgerTotals{{{"tp", K::AllReduce}, times(1, partial_bytes)}} : LedgerTotals{},
          "partial gradients");

      const at::Tensor reference_loss_value = reference_loss(reference);
      reference_loss_value.backward();
      expect_close(loss, reference_loss_value, "loss");
      expect_matches(g, model, reference, true);
      sgd_step(model.parameters());
      sgd_step(reference_list);
    }
    expect_matches(g, model, reference, false);
  });
}

TEST(GptModel, MatchesTheOneProcessModel) { check_model(false); }
TEST(GptModel, MatchesTheOneProcessModelUnderSequenceParallelism) { check_model(true); }

void expect_construction_error(GptConfig c, const Group& g, const std::string& message) {
  try {
    GptModel model(c, g);
    ADD_FAILURE() << "constructed: expected " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(GptModel, BadShapesAreSentences) {
  run([](const Group& g, int, int n) {
    if (n != 4) return;
    GptConfig c = config(false);
    c.heads = 6;
    expect_construction_error(c, g,
                              "GptModel: heads 6 is not a multiple of the tp group's 4 ranks");
    c.heads = 5;
    expect_construction_error(c, g, "GptModel: hidden 24 is not a multiple of heads 5");
    c = config(true);
    c.sequence = 6;
    expect_construction_error(
        c, g,
        "GptModel (sequence parallel): sequence 6 is not a multiple of the tp group's 4 ranks");
    c.layers = 0;
    expect_construction_error(c, g,
                              "GptModel: layers 0, hidden 24, heads 12, vocab 10, sequence 6 must "
                              "all be positive");
    const GptModel model(config(false), g);
    try {
      model.loss(at::zeros({kSeq + 1, kBatch}, at::kLong),
                 at::zeros({kSeq + 1, kBatch}, at::kLong));
      ADD_FAILURE() << "13 tokens through 12 positions";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "GptModel: a sequence of 13 tokens, the model holds 12 positions");
    }
    EXPECT_THROW(all_reduce_partial_gradients({at::zeros({2}, at::kDouble).requires_grad_(),
                                               at::zeros({2}, at::kFloat).requires_grad_()},
                                              g),
                 Error);
    expect_totals(g, {}, "nothing communicated");
  });
}

}  // namespace
}  // namespace chorus::train
