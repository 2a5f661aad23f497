// Parameter counts, FLOPs and activation bytes of the GPT model (model.hpp). Notation of
// PARALLEL.md: h hidden, a heads, s sequence, b micro-batch, f ffn, E experts, k top-k,
// t tp, u cp, e ep; r = s/u the tokens a rank keeps outside attention.
#include "plan/model.hpp"

#include <cmath>
#include <sstream>

namespace chorus::plan {
namespace {

double d(std::int64_t value) { return static_cast<double>(value); }

/// Rows of the terms that only sequence parallelism splits: r, or r/t under SP.
double replicated_rows(const ModelConfig& model, const Layout& layout) {
  const double r = d(model.seq) / layout.cp;
  return layout.sequence_parallel ? r / layout.tp : r;
}

/// Tokens the rank's MoE layer routes per micro-batch (its rows of the MLP input).
double routed_tokens(const ModelConfig& model, const Layout& layout) {
  return replicated_rows(model, layout) * d(layout.micro_batch);
}

}  // namespace

double ModelConfig::parameters() const {
  const double h = d(hidden), f = d(ffn_size());
  const double mlp = 2 * h * f + f + h;
  const double block = 4 * h * h + 4 * h + 4 * h + (moe() ? d(experts) * (mlp + h) : mlp);
  return d(layers) * block + d(vocab) * h + d(seq) * h + 2 * h;
}

std::string ModelConfig::problem() const {
  auto positive = [](std::int64_t v) { return v > 0; };
  if (!positive(layers) || !positive(hidden) || !positive(heads) || !positive(vocab) ||
      !positive(seq) || ffn < 0 || experts < 0) {
    return "model sizes must be positive (layers " + std::to_string(layers) + ", hidden " +
           std::to_string(hidden) + ", heads " + std::to_string(heads) + ", vocab " +
           std::to_string(vocab) + ", seq " + std::to_string(seq) + ")";
  }
  if (hidden % heads != 0) {
    return "hidden " + std::to_string(hidden) + " is not a multiple of heads " +
           std::to_string(heads);
  }
  if (moe() && (top_k < 1 || top_k > 2 || top_k > experts)) {
    return "top-k " + std::to_string(top_k) + " is not 1 or 2 (at most the " +
           std::to_string(experts) + " experts)";
  }
  return "";
}

Precision Precision::fp32() { return {}; }

Precision Precision::bf16() { return {"bf16", 2, 1, 2, 2, 12}; }

const char* to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::Selective:
      return "selective";
    case Recompute::Full:
      return "full";
    case Recompute::None:
      break;
  }
  return "none";
}

const char* to_string(Schedule schedule) {
  switch (schedule) {
    case Schedule::Interleaved:
      return "interleaved";
    case Schedule::GPipe:
      return "gpipe";
    case Schedule::OneFOneB:
      break;
  }
  return "1f1b";
}

std::string Layout::describe() const {
  std::ostringstream out;
  out << "tp " << tp << " pp " << pp << " cp " << cp << " ep " << ep << " dp " << dp
      << (sequence_parallel ? " sp" : "") << " zero " << zero << " recompute "
      << to_string(recompute) << ' ' << to_string(schedule);
  if (schedule == Schedule::Interleaved) out << " v " << virtual_stages;
  out << " m " << micro_batches << " b " << micro_batch;
  return out.str();
}

std::int64_t stage_layers(const ModelConfig& model, const Layout& layout) {
  return (model.layers + layout.pp - 1) / layout.pp;
}

BlockParameters block_parameters(const ModelConfig& model, const Layout& layout) {
  const double h = d(model.hidden), f = d(model.ffn_size()), t = layout.tp;
  // QKV 3h^2 + 3h and proj h^2 split over tp; proj's bias and both LayerNorms replicated.
  const double attention = (4 * h * h + 3 * h) / t + h + 4 * h;
  if (!model.moe()) return {attention + (2 * h * f + f) / t + h, 0};
  const double expert = 2 * h * f + f + h;
  return {attention + d(model.experts) * h, d(model.experts) / layout.ep * expert};
}

double embedding_parameters(const ModelConfig& model, const Layout& layout) {
  return d(model.vocab) * d(model.hidden) / layout.tp + d(model.seq) * d(model.hidden);
}

double attention_core_flops(const ModelConfig& model, const Layout& layout) {
  // q.k^T and .v: 2 * 2 * s * s * (h/a) per head and sample, a/(t*u) heads on the rank.
  return 4 * d(layout.micro_batch) * d(model.seq) * d(model.seq) * d(model.hidden) /
         (layout.tp * layout.cp);
}

double block_forward_flops(const ModelConfig& model, const Layout& layout) {
  const double h = d(model.hidden), f = d(model.ffn_size());
  const double tokens = d(layout.micro_batch) * d(model.seq) / layout.cp;
  const double attention = 2 * tokens * 4 * h * h / layout.tp + attention_core_flops(model, layout);
  if (!model.moe()) return attention + 2 * tokens * 2 * h * f / layout.tp;
  // Router over the rank's routed tokens, then k expert MLPs per token (balanced routing: a
  // rank's experts receive as many rows as it sends).
  const double routed = routed_tokens(model, layout);
  return attention + 2 * routed * h * d(model.experts) + d(model.top_k) * routed * 4 * h * f;
}

double head_forward_flops(const ModelConfig& model, const Layout& layout) {
  const double tokens = d(layout.micro_batch) * d(model.seq) / layout.cp;
  return 2 * tokens * d(model.hidden) * d(model.vocab) / layout.tp;
}

MemoryTraffic block_memory_traffic(const ModelConfig& model, const Layout& layout,
                                   const Precision& precision) {
  const double B = precision.activation, M = model.dropout ? precision.mask : 0;
  const double drop = model.dropout ? 1 : 0, b = d(layout.micro_batch);
  // Replicated rows of h (split by SP only). Forward: 2 LayerNorms read and write (2B each),
  // 2 residual adds read two and write one (3B each) and write their dropout masks (M).
  // Backward: a LayerNorm reads the gradient and its input and writes a gradient (3B); a
  // residual dropout reads the gradient and the mask and writes one (2B + M).
  const double hidden = replicated_rows(model, layout) * b * d(model.hidden);
  // The MLP's inner rows, split over tp: bias + GELU (2B forward, 3B backward).
  const double inner = d(model.seq) / layout.cp * b * d(model.ffn_size()) / layout.tp;
  // The rank's attention matrices: q.k^T writes them, the softmax reads and writes, .v reads
  // (4B); dropout reads, writes and keeps a mask (2B + M). Backward: written by the product
  // with v, the softmax reads two and writes one, both products read the gradient (6B);
  // dropout reads the gradient and mask and writes one (2B + M).
  const double attention =
      d(model.heads) / (layout.tp * layout.cp) * b * d(model.seq) * d(model.seq);
  MemoryTraffic traffic;
  traffic.attention_forward = attention * (4 * B + drop * (2 * B + M));
  traffic.forward = hidden * (10 * B + 2 * M) + inner * 2 * B + traffic.attention_forward;
  traffic.backward = hidden * (6 * B + drop * 2 * (2 * B + M)) + inner * 3 * B +
                     attention * (6 * B + drop * (2 * B + M));
  return traffic;
}

double block_activation_bytes(const ModelConfig& model, const Layout& layout,
                              const Precision& precision) {
  const double h = d(model.hidden), b = d(layout.micro_batch), t = layout.tp;
  const double r = d(model.seq) / layout.cp, rep = replicated_rows(model, layout);
  const double attention = d(model.heads) / (t * layout.cp) * b * d(model.seq) * d(model.seq);
  // Replicated (split by SP only): the block's output, the second LayerNorm's input and the
  // inputs of QKV and fc1 (4 rows of h), the LayerNorms' means and deviations (4 per row).
  double kept = 4 * rep * b * h + 4 * rep * b;
  // Split over tp: q, k, v and the projection's input.
  kept += 4 * r * b * h / t;
  if (model.moe()) {
    // Router probabilities, the dispatched rows, the experts' fc1 and GELU outputs, and the
    // rows they return.
    const double routed = routed_tokens(model, layout), k = d(model.top_k);
    kept += routed * d(model.experts) + k * routed * (2 * h + 2 * d(model.ffn_size()));
  } else {
    kept += 2 * r * b * d(model.ffn_size()) / t;  // fc1's output and GELU's
  }
  double masks = 0;
  if (model.dropout) {
    kept += 2 * attention;  // the softmax output and the dropout's output
    masks = 2 * rep * b * h + attention;
  } else {
    kept += attention;
  }
  const double causal_mask = d(model.seq) * d(model.seq);  // s^2 bools
  return precision.activation * kept + precision.mask * masks + causal_mask;
}

double kept_activation_bytes(const ModelConfig& model, const Layout& layout,
                             const Precision& precision) {
  const double full = block_activation_bytes(model, layout, precision);
  const double attention = d(model.heads) / (layout.tp * layout.cp) * d(layout.micro_batch) *
                           d(model.seq) * d(model.seq);
  switch (layout.recompute) {
    case Recompute::Selective: {
      const double core = model.dropout ? (2 * precision.activation + precision.mask) * attention
                                        : precision.activation * attention;
      return full - core;
    }
    case Recompute::Full:
      return precision.activation * replicated_rows(model, layout) * d(layout.micro_batch) *
             d(model.hidden);
    case Recompute::None:
      break;
  }
  return full;
}

}  // namespace chorus::plan
