// The GPT model over the tensor-parallel layers; see include/chorus/train/gpt.hpp.
//
// Attention on a rank: the column-parallel QKV output [s, b, (a/t)·3·d] is viewed as
// [s, b, a/t, 3, d] (the head-major layout of gpt.hpp), each head's causal attention is
// softmax(q·kᵀ/√d + mask)·v with −∞ above the diagonal, and the heads' outputs [s, b, (a/t)·d]
// are the row-parallel projection's parallel input. Under context parallelism the core runs on
// the whole sequence and a u-th of those heads, between the two all-to-alls of
// context_parallel.hpp. Dropout (gpt_dropout.hpp) sits on the embedding's output, the
// attention probabilities and the outputs of attention and the MLP before their residual adds;
// recomputation (recompute.hpp) wraps the attention core (selective) or whole blocks (full).
#include "../autograd/tensor_collectives.hpp"
#include "../tensor_parallel/parameters.hpp"
#include "context_parallel.hpp"
#include "gpt_dropout.hpp"
#include "gpt_mlp.hpp"
#include "recompute.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/random.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace chorus::train {
namespace {

using detail::DropoutPlan, detail::GptDropoutSite, detail::SequenceRows, detail::hidden_dropout;

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

using detail::column_options, detail::layer_init, detail::output_std, detail::row_options;

struct Block {
  std::string name;
  std::int64_t index;
  LayerNorm input_norm, post_attention_norm;
  ColumnParallelLinear qkv;
  RowParallelLinear proj;
  detail::GptMlp mlp;
  /// This rank's heads are [first_head, first_head + a/(t·u)) of `heads` (the tp rank's a/t,
  /// of which the cp rank takes its u-th around the attention core).
  std::int64_t head_dim, heads, first_head;
  bool selective;  ///< recompute the attention core in backward
  detail::ContextSplit cp;

  Block(const GptConfig& c, const Group& tp, const detail::ContextSplit& context,
        const std::optional<Group>& ep, std::int64_t i,
        const std::shared_ptr<detail::GptMoeState>& moe)
      : name("layers." + std::to_string(i)),
        index(i),
        input_norm(c, name + ".input_norm"),
        post_attention_norm(c, name + ".post_attention_norm"),
        qkv(c.hidden, 3 * c.hidden, tp, layer_init(c, name + ".attention.qkv", c.init_std),
            column_options(c)),
        proj(c.hidden, c.hidden, tp, layer_init(c, name + ".attention.proj", output_std(c)),
             row_options(c)),
        mlp(c, tp, ep, i, moe),
        head_dim(c.hidden / c.heads),
        heads(c.heads),
        first_head(c.heads / tp.size() * tp.rank() +
                   c.heads / tp.size() / context.size() * context.rank()),
        selective(c.recompute == Recompute::Selective),
        cp(context) {}

  /// The attention core (what selective recomputation recomputes): this rank's heads' q, k, v
  /// [b, heads, s, d] -> their causal attention [b, heads, s, d].
  at::Tensor core_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const DropoutPlan& plan) const {
    const std::int64_t s = q.size(2);
    const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head_dim));
    const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
    const at::Tensor probabilities =
        at::softmax(scores.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    return at::matmul(detail::attention_dropout(probabilities, plan, index, first_head, heads), v);
  }

  /// [s, b, h] (replicated; under cp this rank's s/u rows) -> this rank's heads' outputs
  /// [s, b, (a/t)·d] (the same rows).
  at::Tensor attention(const at::Tensor& x, const DropoutPlan& plan) const {
    const at::Tensor fused = qkv.forward(x);
    const std::int64_t rows = fused.size(0), b = fused.size(1), d = head_dim;
    // [rows, b, heads, 3, d] -> [s, b, heads/u, 3, d] -> [3, b, heads/u, s, d]
    const at::Tensor parts = cp.to_heads(fused.view({rows, b, -1, 3, d})).permute({3, 1, 2, 0, 4});
    const at::Tensor context = selective ? detail::recomputed(
                                               [this, plan](const std::vector<at::Tensor>& in) {
                                                 return core_attention(in[0], in[1], in[2], plan);
                                               },
                                               {parts[0], parts[1], parts[2]}, {})
                                         : core_attention(parts[0], parts[1], parts[2], plan);
    // [b, heads/u, s, d] -> [s, b, heads/u, d] -> [rows, b, heads·d]
    return cp.to_sequence(context.permute({2, 0, 1, 3})).reshape({rows, b, -1});
  }

  at::Tensor forward(const at::Tensor& x, const DropoutPlan& plan, const SequenceRows& rows) const {
    const at::Tensor attended = proj.forward(attention(input_norm.forward(x), plan));
    const at::Tensor h =
        x + hidden_dropout(attended, plan, index, GptDropoutSite::AttentionOutput, rows);
    const at::Tensor branch = mlp.forward(post_attention_norm.forward(h));
    return h + hidden_dropout(branch, plan, index, GptDropoutSite::MlpOutput, rows);
  }

  /// The block as one recomputed function of its input (full recomputation).
  at::Tensor forward_recomputed(const at::Tensor& x, const DropoutPlan& plan,
                                const SequenceRows& rows) const {
    return detail::recomputed(
        [this, plan, rows](const std::vector<at::Tensor>& in) {
          return forward(in[0], plan, rows);
        },
        {x}, parameters());
  }

  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> out{input_norm.weight, input_norm.bias, post_attention_norm.weight,
                                post_attention_norm.bias};
    for (const auto& ts : {qkv.parameters(), proj.parameters(), mlp.parameters()})
      out.insert(out.end(), ts.begin(), ts.end());
    return out;
  }

  std::size_t compute_weight_gradients() const {
    return qkv.compute_weight_gradients() + proj.compute_weight_gradients() +
           mlp.compute_weight_gradients();
  }
  std::size_t pending_weight_gradients() const {
    return qkv.pending_weight_gradients() + proj.pending_weight_gradients() +
           mlp.pending_weight_gradients();
  }
};

/// `c`, after checking it against the tp and cp groups.
const GptConfig& checked(const GptConfig& c, const Group& tp, const detail::ContextSplit& cp,
                         bool has_ep) {
  const auto number = [](std::int64_t v) { return std::to_string(v); };
  require_argument(
      c.layers >= 1 && c.hidden >= 1 && c.heads >= 1 && c.vocab >= 1 && c.sequence >= 1,
      "GptModel: layers " + number(c.layers) + ", hidden " + number(c.hidden) + ", heads " +
          number(c.heads) + ", vocab " + number(c.vocab) + ", sequence " + number(c.sequence) +
          " must all be positive");
  require_argument(c.hidden % c.heads == 0, "GptModel: hidden " + number(c.hidden) +
                                                " is not a multiple of heads " + number(c.heads));
  std::ostringstream dropout;
  dropout << c.dropout;
  require_argument(c.dropout >= 0 && c.dropout < 1,
                   "GptModel: dropout " + dropout.str() + " is outside [0, 1)");
  require_argument(c.recompute == Recompute::None || c.recompute == Recompute::Selective ||
                       c.recompute == Recompute::Full,
                   "GptModel: recompute " + std::to_string(static_cast<int>(c.recompute)) +
                       " is not none, selective or full");
  detail::require_features("GptModel", "heads", c.heads, tp.size(), tp.name.c_str());
  if (!c.pad_vocabulary)
    detail::require_features("GptModel (vocabulary padding off)", "vocab", c.vocab, tp.size(),
                             tp.name.c_str());
  if (c.sequence_parallel)
    detail::require_features("GptModel (sequence parallel)", "sequence", c.sequence, tp.size(),
                             tp.name.c_str());
  detail::check_context_parallel(c, tp.size(), cp.size());
  detail::check_moe_config(c, has_ep);
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
  detail::ContextSplit cp;
  GptParts parts;
  std::optional<Group> ep;  ///< the expert group of the MoE blocks
  std::shared_ptr<detail::GptMoeState> moe = std::make_shared<detail::GptMoeState>();
  std::optional<VocabParallelEmbedding> embedding;
  at::Tensor position;                       ///< [sequence, h], replicated; undefined if not built
  std::vector<std::optional<Block>> blocks;  ///< every block's slot; the built ones hold it
  std::optional<LayerNorm> final_norm;
  DropoutPosition position_now;  ///< set_step's
  bool training = true;

  Impl(const GptConfig& c, const Group& g, const detail::ContextSplit& context,
       const std::optional<Group>& e, const GptParts& p)
      : config(checked(c, g, context, e.has_value())),
        tp(g),
        cp(context),
        parts(checked(p, c)),
        ep(e) {
    moe->context_ranks = context.size();
    if (p.embedding)
      embedding.emplace(c.vocab, c.hidden, g, layer_init(c, "embedding", c.init_std),
                        EmbeddingOptions{.sequence_parallel = c.sequence_parallel});
    if (p.position_embedding)
      position = replicated_parameter(c, "position_embedding.weight", {c.sequence, c.hidden},
                                      InitKind::Normal, c.init_std);
    blocks.resize(static_cast<std::size_t>(c.layers));
    for (std::int64_t i = 0; i < c.layers; ++i)
      if (p.blocks.empty() || p.blocks[static_cast<std::size_t>(i)])
        blocks[static_cast<std::size_t>(i)].emplace(c, g, cp, ep, i, moe);
    if (p.final_norm) final_norm.emplace(c, "final_norm");
  }

  /// The masks of a forward pass that starts now.
  DropoutPlan plan() const {
    return {.p = training ? config.dropout : 0.0,
            .seed = config.seed,
            .step = position_now.step,
            .micro_batch = position_now.micro_batch,
            .first_sample = position_now.first_sample};
  }

  /// Where this rank's `rows` rows of the hidden state lie in the sequence: the cp rank's s/u
  /// rows, split again over tp under sequence parallelism.
  SequenceRows sequence_rows(std::int64_t rows) const {
    const std::int64_t per_cp = config.sequence_parallel ? rows * tp.size() : rows;
    const std::int64_t s = per_cp * cp.size();
    const std::int64_t tp_offset = config.sequence_parallel ? rows * tp.rank() : 0;
    return {cp.first_row(s) + tp_offset, s};
  }

  /// The position embedding of this rank's rows of the first `s` positions, [rows, 1, h]:
  /// the cp rank's s/u rows, split again over tp under sequence parallelism.
  at::Tensor positions(std::int64_t s) const {
    const std::int64_t first = cp.first_row(s), local = s / cp.size();
    if (!config.sequence_parallel) return position.narrow(0, first, local).unsqueeze(1);
    const std::int64_t rows = local / tp.size();
    return position.narrow(0, first + rows * tp.rank(), rows).unsqueeze(1);
  }
};

GptModel::GptModel(const GptConfig& config, const Group& tp, const GptParts& parts)
    : impl_(std::make_unique<Impl>(config, tp, detail::ContextSplit(), std::nullopt, parts)) {}
GptModel::GptModel(const GptConfig& config, const Group& tp, const Group& cp, const GptParts& parts)
    : impl_(std::make_unique<Impl>(config, tp, detail::ContextSplit(cp), std::nullopt, parts)) {}
GptModel::GptModel(const GptConfig& config, const Group& tp, const Group& cp, const Group& ep,
                   const GptParts& parts)
    : impl_(std::make_unique<Impl>(config, tp, detail::ContextSplit(cp), ep, parts)) {}
GptModel::~GptModel() = default;
GptModel::GptModel(GptModel&&) noexcept = default;
GptModel& GptModel::operator=(GptModel&&) noexcept = default;

const GptConfig& GptModel::config() const { return impl_->config; }
const Group& GptModel::tp() const { return impl_->tp; }
const std::optional<Group>& GptModel::cp() const { return impl_->cp.group(); }
at::Tensor GptModel::local_rows(const at::Tensor& x) const { return impl_->cp.local_rows(x); }
void GptModel::sum_over_cp(at::Tensor& value) const { impl_->cp.sum(value); }

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
  const at::Tensor x =
      built(impl_->embedding, "the embedding").forward(impl_->cp.local_rows(tokens)) +
      impl_->positions(s);
  return hidden_dropout(x, impl_->plan(), 0, GptDropoutSite::Embedding,
                        impl_->sequence_rows(x.size(0)));
}

at::Tensor GptModel::run_blocks(const at::Tensor& hidden, std::int64_t first,
                                std::int64_t count) const {
  const std::int64_t layers = impl_->config.layers;
  require_argument(first >= 0 && count >= 0 && first + count <= layers,
                   "GptModel: blocks [" + std::to_string(first) + ", " +
                       std::to_string(first + count) + ") of " + std::to_string(layers));
  const DropoutPlan plan = impl_->plan();
  const SequenceRows rows = impl_->sequence_rows(hidden.size(0));
  const bool full = impl_->config.recompute == Recompute::Full;
  at::Tensor x = hidden;
  for (std::int64_t i = first; i < first + count; ++i) {
    const std::optional<Block>& block = impl_->blocks[static_cast<std::size_t>(i)];
    if (!block) require_usage(false, "block " + std::to_string(i));
    x = full ? block->forward_recomputed(x, plan, rows) : block->forward(x, plan, rows);
  }
  return x;
}

at::Tensor GptModel::head(const at::Tensor& hidden) const {
  const LayerNorm& norm = built(impl_->final_norm, "the final norm");
  return built(impl_->embedding, "the embedding").logits(norm.forward(hidden));
}

at::Tensor GptModel::loss(const at::Tensor& tokens, const at::Tensor& targets) const {
  const at::Tensor per_token = vocab_parallel_cross_entropy(
      logits(tokens), impl_->cp.local_rows(targets), impl_->tp, impl_->config.vocab);
  return impl_->cp.mean(per_token);
}

void GptModel::set_step(const DropoutPosition& position) { impl_->position_now = position; }
const DropoutPosition& GptModel::step() const { return impl_->position_now; }
void GptModel::set_training(bool training) { impl_->training = training; }
bool GptModel::training() const { return impl_->training; }

std::size_t GptModel::compute_weight_gradients() const {
  std::size_t done = 0;
  for (const std::optional<Block>& b : impl_->blocks)
    if (b) done += b->compute_weight_gradients();
  return done;
}

std::size_t GptModel::pending_weight_gradients() const {
  std::size_t pending = 0;
  for (const std::optional<Block>& b : impl_->blocks)
    if (b) pending += b->pending_weight_gradients();
  return pending;
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
    for (GptParameter& p : b.mlp.named_parameters()) out.push_back(std::move(p));
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
    append(b->mlp.partial_gradient_parameters());
  }
  if (impl_->final_norm) append({impl_->final_norm->weight, impl_->final_norm->bias});
  return out;
}

void GptModel::set_moe_loss_scale(double scale) { impl_->moe->loss_scale = scale; }

std::vector<const MoeLayer*> GptModel::moe_layers() const {
  std::vector<const MoeLayer*> out;
  for (const std::optional<Block>& b : impl_->blocks)
    if (b && b->mlp.moe() != nullptr) out.push_back(b->mlp.moe());
  return out;
}

GptMoeCounters GptModel::take_moe_counters() const {
  return std::exchange(impl_->moe->counters, {});
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
