// The GPT model over the tensor-parallel layers; see include/chorus/train/gpt.hpp.
//
// Attention on a rank: the column-parallel QKV output [s, b, (a/t)·3·d] is viewed as
// [s, b, a/t, 3, d] (the head-major layout of gpt.hpp), each head's causal attention is
// softmax(q·kᵀ/√d + mask)·v with −∞ above the diagonal, and the heads' outputs [s, b, (a/t)·d]
// are the row-parallel projection's parallel input.
#include "../autograd/tensor_collectives.hpp"
#include "../tensor_parallel/parameters.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/random.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace chorus::train {
namespace {

/// A parameter of `shape` from init_slice: Normal(0, std), or Constant(value) when std is 0.
at::Tensor replicated_parameter(const GptConfig& c, const std::string& name, at::IntArrayRef shape,
                                InitKind kind, double scale) {
  const InitSpec spec{.seed = c.seed, .name = name, .kind = kind, .scale = scale, .dtype = c.dtype};
  return init_slice(spec, shape).set_requires_grad(true);
}

struct LayerNorm {
  at::Tensor weight, bias;
  LayerNorm(const GptConfig& c, const std::string& name)
      : weight(replicated_parameter(c, name + ".weight", {c.hidden}, InitKind::Constant, 1.0)),
        bias(replicated_parameter(c, name + ".bias", {c.hidden}, InitKind::Constant, 0.0)) {}
  at::Tensor forward(const at::Tensor& x) const {
    return at::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
  }
};

ParameterInit layer_init(const GptConfig& c, const std::string& name, double std) {
  return {.seed = c.seed, .name = name, .init_std = std, .dtype = c.dtype};
}

struct Block {
  std::string name;
  LayerNorm input_norm, post_attention_norm;
  ColumnParallelLinear qkv, fc1;
  RowParallelLinear proj, fc2;
  std::int64_t head_dim;

  Block(const GptConfig& c, const Group& tp, std::int64_t index)
      : name("layers." + std::to_string(index)),
        input_norm(c, name + ".input_norm"),
        post_attention_norm(c, name + ".post_attention_norm"),
        qkv(c.hidden, 3 * c.hidden, tp, layer_init(c, name + ".attention.qkv", c.init_std),
            {.sequence_parallel = c.sequence_parallel}),
        fc1(c.hidden, 4 * c.hidden, tp, layer_init(c, name + ".mlp.fc1", c.init_std),
            {.sequence_parallel = c.sequence_parallel}),
        proj(c.hidden, c.hidden, tp, layer_init(c, name + ".attention.proj", output_std(c)),
             {.sequence_parallel = c.sequence_parallel}),
        fc2(4 * c.hidden, c.hidden, tp, layer_init(c, name + ".mlp.fc2", output_std(c)),
            {.sequence_parallel = c.sequence_parallel}),
        head_dim(c.hidden / c.heads) {}

  static double output_std(const GptConfig& c) {
    return c.init_std / std::sqrt(2.0 * static_cast<double>(c.layers));
  }

  /// [s, b, h] (replicated) -> this rank's heads' outputs [s, b, (a/t)·d].
  at::Tensor attention(const at::Tensor& x) const {
    const at::Tensor fused = qkv.forward(x);
    const std::int64_t s = fused.size(0), b = fused.size(1), d = head_dim;
    // [s, b, heads, 3, d] -> [3, b, heads, s, d]
    const at::Tensor parts = fused.view({s, b, -1, 3, d}).permute({3, 1, 2, 0, 4});
    const at::Tensor q = parts[0], k = parts[1], v = parts[2];
    const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(d));
    const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
    const at::Tensor probabilities =
        at::softmax(scores.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    // [b, heads, s, d] -> [s, b, heads·d]
    return at::matmul(probabilities, v).permute({2, 0, 1, 3}).reshape({s, b, -1});
  }

  at::Tensor forward(const at::Tensor& x) const {
    const at::Tensor h = x + proj.forward(attention(input_norm.forward(x)));
    return h + fc2.forward(at::gelu(fc1.forward(post_attention_norm.forward(h))));
  }
};

/// `c`, after checking it against the tp group.
const GptConfig& checked(const GptConfig& c, const Group& tp) {
  const auto number = [](std::int64_t v) { return std::to_string(v); };
  require_argument(
      c.layers >= 1 && c.hidden >= 1 && c.heads >= 1 && c.vocab >= 1 && c.sequence >= 1,
      "GptModel: layers " + number(c.layers) + ", hidden " + number(c.hidden) + ", heads " +
          number(c.heads) + ", vocab " + number(c.vocab) + ", sequence " + number(c.sequence) +
          " must all be positive");
  require_argument(c.hidden % c.heads == 0, "GptModel: hidden " + number(c.hidden) +
                                                " is not a multiple of heads " + number(c.heads));
  detail::require_features("GptModel", "heads", c.heads, tp.size(), tp.name.c_str());
  if (c.sequence_parallel)
    detail::require_features("GptModel (sequence parallel)", "sequence", c.sequence, tp.size(),
                             tp.name.c_str());
  return c;
}

/// `parts`, after checking its block list against the config.
const GptParts& checked(const GptParts& parts, const GptConfig& c) {
  require_argument(
      parts.blocks.empty() || static_cast<std::int64_t>(parts.blocks.size()) == c.layers,
      "GptModel: parts name " + std::to_string(parts.blocks.size()) + " blocks of a model of " +
          std::to_string(c.layers));
  return parts;
}

/// InvalidUsage naming `part` unless `is_built`.
void require_usage(bool is_built, const std::string& part) {
  if (!is_built) throw Error(Status::InvalidUsage, "GptModel: " + part + " is not built here");
}

/// `part`, or InvalidUsage naming it when this model did not build it.
template <class T>
const T& built(const std::optional<T>& part, const std::string& name) {
  require_usage(part.has_value(), name);
  return *part;
}

}  // namespace

struct GptModel::Impl {
  GptConfig config;
  Group tp;
  GptParts parts;
  std::optional<VocabParallelEmbedding> embedding;
  at::Tensor position;                       ///< [sequence, h], replicated; undefined if not built
  std::vector<std::optional<Block>> blocks;  ///< every block's slot; the built ones hold it
  std::optional<LayerNorm> final_norm;

  Impl(const GptConfig& c, const Group& g, const GptParts& p)
      : config(checked(c, g)), tp(g), parts(checked(p, c)) {
    if (p.embedding)
      embedding.emplace(c.vocab, c.hidden, g, layer_init(c, "embedding", c.init_std),
                        EmbeddingOptions{.sequence_parallel = c.sequence_parallel});
    if (p.position_embedding)
      position = replicated_parameter(c, "position_embedding.weight", {c.sequence, c.hidden},
                                      InitKind::Normal, c.init_std);
    blocks.resize(static_cast<std::size_t>(c.layers));
    for (std::int64_t i = 0; i < c.layers; ++i)
      if (p.blocks.empty() || p.blocks[static_cast<std::size_t>(i)])
        blocks[static_cast<std::size_t>(i)].emplace(c, g, i);
    if (p.final_norm) final_norm.emplace(c, "final_norm");
  }

  /// The position embedding of this rank's rows of the first `s` positions, [rows, 1, h].
  at::Tensor positions(std::int64_t s) const {
    if (!config.sequence_parallel) return position.narrow(0, 0, s).unsqueeze(1);
    const std::int64_t rows = s / tp.size();
    return position.narrow(0, rows * tp.rank(), rows).unsqueeze(1);
  }
};

GptModel::GptModel(const GptConfig& config, const Group& tp, const GptParts& parts)
    : impl_(std::make_unique<Impl>(config, tp, parts)) {}
GptModel::~GptModel() = default;
GptModel::GptModel(GptModel&&) noexcept = default;
GptModel& GptModel::operator=(GptModel&&) noexcept = default;

const GptConfig& GptModel::config() const { return impl_->config; }
const Group& GptModel::tp() const { return impl_->tp; }

at::Tensor GptModel::logits(const at::Tensor& tokens) const {
  return head(run_blocks(embed(tokens), 0, impl_->config.layers));
}

at::Tensor GptModel::embed(const at::Tensor& tokens) const {
  const GptConfig& c = impl_->config;
  require_argument(tokens.defined() && tokens.dim() == 2 && tokens.scalar_type() == at::kLong,
                   "GptModel: tokens must be an int64 tensor [s, b]");
  const std::int64_t s = tokens.size(0);
  require_argument(s >= 1 && s <= c.sequence, "GptModel: a sequence of " + std::to_string(s) +
                                                  " tokens, the model holds " +
                                                  std::to_string(c.sequence) + " positions");
  require_usage(impl_->position.defined(), "the position embedding");
  return built(impl_->embedding, "the embedding").forward(tokens) + impl_->positions(s);
}

at::Tensor GptModel::run_blocks(const at::Tensor& hidden, std::int64_t first,
                                std::int64_t count) const {
  const std::int64_t layers = impl_->config.layers;
  require_argument(first >= 0 && count >= 0 && first + count <= layers,
                   "GptModel: blocks [" + std::to_string(first) + ", " +
                       std::to_string(first + count) + ") of " + std::to_string(layers));
  at::Tensor x = hidden;
  for (std::int64_t i = first; i < first + count; ++i) {
    const std::optional<Block>& block = impl_->blocks[static_cast<std::size_t>(i)];
    if (!block) require_usage(false, "block " + std::to_string(i));
    x = block->forward(x);
  }
  return x;
}

at::Tensor GptModel::head(const at::Tensor& hidden) const {
  const LayerNorm& norm = built(impl_->final_norm, "the final norm");
  return built(impl_->embedding, "the embedding").logits(norm.forward(hidden));
}

at::Tensor GptModel::loss(const at::Tensor& tokens, const at::Tensor& targets) const {
  const at::Tensor per_token =
      vocab_parallel_cross_entropy(logits(tokens), targets, impl_->tp, impl_->config.vocab);
  return per_token.mean();
}

std::vector<GptParameter> GptModel::named_parameters() const {
  std::vector<GptParameter> out;
  if (impl_->embedding) out.push_back({"embedding.weight", impl_->embedding->weight(), 0});
  if (impl_->position.defined()) out.push_back({"position_embedding.weight", impl_->position, -1});
  const auto norm = [&out](const std::string& name, const LayerNorm& n) {
    out.push_back({name + ".weight", n.weight, -1});
    out.push_back({name + ".bias", n.bias, -1});
  };
  for (const std::optional<Block>& built_block : impl_->blocks) {
    if (!built_block) continue;
    const Block& b = *built_block;
    norm(b.name + ".input_norm", b.input_norm);
    out.push_back({b.name + ".attention.qkv.weight", b.qkv.weight(), 0});
    out.push_back({b.name + ".attention.qkv.bias", b.qkv.bias(), 0});
    out.push_back({b.name + ".attention.proj.weight", b.proj.weight(), 1});
    out.push_back({b.name + ".attention.proj.bias", b.proj.bias(), -1});
    norm(b.name + ".post_attention_norm", b.post_attention_norm);
    out.push_back({b.name + ".mlp.fc1.weight", b.fc1.weight(), 0});
    out.push_back({b.name + ".mlp.fc1.bias", b.fc1.bias(), 0});
    out.push_back({b.name + ".mlp.fc2.weight", b.fc2.weight(), 1});
    out.push_back({b.name + ".mlp.fc2.bias", b.fc2.bias(), -1});
  }
  if (impl_->final_norm) norm("final_norm", *impl_->final_norm);
  return out;
}

std::vector<at::Tensor> GptModel::parameters() const {
  std::vector<at::Tensor> out;
  for (const GptParameter& p : named_parameters()) out.push_back(p.tensor);
  return out;
}

std::vector<at::Tensor> GptModel::partial_gradient_parameters() const {
  if (!impl_->config.sequence_parallel) return {};
  std::vector<at::Tensor> out;
  const auto append = [&out](const std::vector<at::Tensor>& ts) {
    out.insert(out.end(), ts.begin(), ts.end());
  };
  if (impl_->position.defined()) out.push_back(impl_->position);
  for (const std::optional<Block>& b : impl_->blocks) {
    if (!b) continue;
    append({b->input_norm.weight, b->input_norm.bias, b->post_attention_norm.weight,
            b->post_attention_norm.bias});
    append(b->proj.partial_gradient_parameters());
    append(b->fc2.partial_gradient_parameters());
  }
  if (impl_->final_norm) append({impl_->final_norm->weight, impl_->final_norm->bias});
  return out;
}

void all_reduce_partial_gradients(const std::vector<at::Tensor>& parameters, const Group& tp) {
  if (parameters.empty() || tp.size() == 1) return;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : parameters) {
    require_argument(p.scalar_type() == parameters.front().scalar_type(),
                     std::string("all_reduce_partial_gradients: parameters of ") +
                         at::toString(parameters.front().scalar_type()) + " and " +
                         at::toString(p.scalar_type()) + " in one call");
    flat.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                      : at::zeros({p.numel()}, p.options()));
  }
  const at::Tensor sum = detail::all_reduce_sum(tp, at::cat(flat));
  std::int64_t offset = 0;
  for (const at::Tensor& p : parameters) {
    const at::Tensor part = sum.narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined())
      p.mutable_grad().copy_(part);
    else
      p.mutable_grad() = part.clone();
    offset += p.numel();
  }
}

}  // namespace chorus::train
