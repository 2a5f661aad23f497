// The tiny GPT of tiny_gpt.hpp written out in plain torch on full tensors, in one process: the
// reference the tensor-parallel model must equal (PARALLEL.md section 4.1). Its parameters come
// from init_slice with the model's names and scales; its dropout masks from dropout_mask on the
// whole tensors, keyed as the model keys them (layer, site; the sample index slowest).
#pragma once

#include <chorus/train/gpt.hpp>
#include <chorus/train/random.hpp>

#include "../tensor_parallel/tp_test_util.hpp"
#include "tiny_gpt.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace chorus::train::gpt_reference {

using tiny_gpt::kBatch, tiny_gpt::kHeads, tiny_gpt::kHidden, tiny_gpt::kLayers, tiny_gpt::kSeq,
    tiny_gpt::kStd;

using Parameters = std::map<std::string, at::Tensor>;

/// The degree-1 model's full parameters for `seed`.
inline Parameters parameters(std::int64_t vocab, std::uint64_t seed) {
  Parameters p;
  const auto add = [&p, seed](const std::string& name, std::vector<std::int64_t> shape,
                              InitKind kind, double scale) {
    p[name] =
        init_slice({.seed = seed, .name = name, .kind = kind, .scale = scale, .dtype = at::kDouble},
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
  add("embedding.weight", {vocab, kHidden}, InitKind::Normal, kStd);
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

/// The dropout of one forward pass: probability p (0: none) and the mask key's fixed part.
struct Dropout {
  double p = 0;
  std::uint64_t seed = 0, step = 0, micro_batch = 0;

  /// x (full shape `shape`) times the mask of (layer, site) over `shape`, optionally permuted.
  at::Tensor apply(const at::Tensor& x, std::uint64_t layer, std::uint64_t site,
                   std::vector<std::int64_t> shape, at::IntArrayRef permutation = {}) const {
    if (p == 0) return x;
    const at::Tensor mask =
        dropout_mask({seed, step, micro_batch, layer, site}, p, shape, {}, at::kDouble);
    return x * (permutation.empty() ? mask : mask.permute(permutation));
  }
  /// Dropout of a hidden state [s, b, h]: its mask is drawn over [b, s, h].
  at::Tensor hidden(const at::Tensor& x, std::uint64_t layer, std::uint64_t site) const {
    return apply(x, layer, site, {x.size(1), x.size(0), x.size(2)}, {1, 0, 2});
  }
};

// The model's sites: embedding 0, attention probabilities 1, attention output 2, MLP output 3.
inline constexpr std::uint64_t kEmbedding = 0, kProbabilities = 1, kAttentionOutput = 2,
                               kMlpOutput = 3;

/// Causal self-attention of [s, b, h] with the fused weight's rows ordered (head, q|k|v, d).
inline at::Tensor attention(Parameters& p, const std::string& layer, std::uint64_t index,
                            const at::Tensor& x, const Dropout& dropout) {
  const std::int64_t d = kHidden / kHeads;
  const at::Tensor qkv =
      at::linear(x, p[layer + ".weight"], p[layer + ".bias"]).view({kSeq, kBatch, kHeads, 3, d});
  const auto part = [&](int i) { return qkv.select(3, i).permute({1, 2, 0, 3}); };  // [b, a, s, d]
  const at::Tensor mask =
      at::full({kSeq, kSeq}, -std::numeric_limits<double>::infinity(), at::kDouble).triu(1);
  const at::Tensor probabilities =
      at::softmax(at::matmul(part(0), part(1).transpose(-2, -1)) / std::sqrt(double(d)) + mask, -1);
  const at::Tensor dropped =
      dropout.apply(probabilities, index, kProbabilities, {kBatch, kHeads, kSeq, kSeq});
  return at::matmul(dropped, part(2)).permute({2, 0, 1, 3}).reshape({kSeq, kBatch, kHidden});
}

/// The mean token loss of `tokens` against `targets` [s, b].
inline at::Tensor loss(Parameters& p, std::int64_t vocab, const at::Tensor& tokens,
                       const at::Tensor& targets, const Dropout& dropout = {}) {
  const auto norm = [&p](const std::string& name, const at::Tensor& x) {
    return at::layer_norm(x, {kHidden}, p[name + ".weight"], p[name + ".bias"], 1e-5);
  };
  const auto linear = [&p](const std::string& name, const at::Tensor& x) {
    return at::linear(x, p[name + ".weight"], p[name + ".bias"]);
  };
  at::Tensor x = dropout.hidden(
      at::embedding(p["embedding.weight"], tokens) + p["position_embedding.weight"].unsqueeze(1), 0,
      kEmbedding);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    const std::string layer = "layers." + std::to_string(l);
    const auto index = static_cast<std::uint64_t>(l);
    const at::Tensor context =
        attention(p, layer + ".attention.qkv", index, norm(layer + ".input_norm", x), dropout);
    x = x + dropout.hidden(linear(layer + ".attention.proj", context), index, kAttentionOutput);
    const at::Tensor mlp =
        linear(layer + ".mlp.fc2",
               at::gelu(linear(layer + ".mlp.fc1", norm(layer + ".post_attention_norm", x))));
    x = x + dropout.hidden(mlp, index, kMlpOutput);
  }
  const at::Tensor logits = at::linear(norm("final_norm", x), p["embedding.weight"]);
  return at::nll_loss(at::log_softmax(logits.view({-1, vocab}), -1), targets.view({-1}));
}

/// Every parameter of `model` (or its gradient), reassembled from the ranks' shards, equals the
/// reference's; the embedding's padded rows are zero.
inline void expect_matches(const Group& g, const GptModel& model, Parameters& reference,
                           std::int64_t vocab, bool gradients) {
  for (const GptParameter& p : model.named_parameters()) {
    const std::string what = p.name + (gradients ? " gradient" : "");
    const at::Tensor local = gradients ? p.tensor.grad() : p.tensor.detach();
    ASSERT_TRUE(local.defined()) << what;
    at::Tensor full = p.shard_dim < 0 ? local : tp_test::reassembled(g, local, p.shard_dim);
    if (p.name == "embedding.weight") {
      EXPECT_EQ(full.narrow(0, vocab, full.size(0) - vocab).count_nonzero().item<int>(), 0)
          << what << ": padded rows";
      full = full.narrow(0, 0, vocab);
    }
    const at::Tensor& ref = reference.at(p.name);
    tp_test::expect_close(full, gradients ? ref.grad() : ref.detach(), what);
  }
}

/// One SGD step of `rate` on `parameters`, gradients zeroed after.
inline void sgd_step(const std::vector<at::Tensor>& parameters, double rate) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    p.sub_(p.grad() * rate);
    p.mutable_grad().zero_();
  }
}

/// The ledger's totals since the last call are `expected` (nothing on a group of one).
inline void expect_totals(const Group& g, LedgerTotals expected, const std::string& what) {
  if (g.size() == 1) expected.clear();
  const std::vector<LedgerEntry> entries = g.ledger->take();
  CollectiveLedger got;
  got.enable();
  for (const LedgerEntry& e : entries) got.record(e.group, e.kind, e.bytes);
  EXPECT_EQ(got.totals(), expected) << what << ": got " << describe(entries);
}

inline LedgerTotal times(std::size_t calls, std::size_t bytes) { return {calls, calls * bytes}; }

}  // namespace chorus::train::gpt_reference
