// The GPT's dropout (GPT-2's and Megatron's sites), with masks that do not depend on the
// layout: every mask element is dropout_keeps(key, global index) (random.hpp), keyed by
// (seed, step, micro-batch, layer, site) and indexed in the full tensor of the whole model on
// the whole batch, so a rank's mask at any tp degree, with or without sequence parallelism,
// is the slice of the degree-1 model's mask, and recomputation replays it from the key.
//
//   site            tensor                        full shape (row-major index)
//   Embedding       embedding + positions         [samples, s, h]     layer 0
//   Probabilities   attention probabilities       [samples, a, s, s]  (sample, head, query, key)
//   AttentionOutput attention's projection output [samples, s, h]     before the residual add
//   MlpOutput       the MLP's output              [samples, s, h]     before the residual add
//
// `samples` counts from the micro-batch's first global sample (the sample index is the
// slowest dimension, so the index of a sample's elements does not depend on how many samples
// follow it).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace chorus::train::detail {

enum class GptDropoutSite : std::uint64_t {
  Embedding = 0,
  Probabilities = 1,
  AttentionOutput = 2,
  MlpOutput = 3,
};

/// What one forward pass's masks depend on besides the site. Taken when the forward pass
/// starts and kept by value, so a backward or a recomputation replays the same masks whatever
/// the model's position is by then.
struct DropoutPlan {
  double p = 0;  ///< 0: no dropout (evaluation, or a model without dropout)
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t micro_batch = 0;
  std::int64_t first_sample = 0;  ///< the global index of the micro-batch's first sample
};

/// Rows [offset, offset + length) of a sequence of `full` positions.
struct SequenceRows {
  std::int64_t offset = 0;
  std::int64_t full = 0;
};

/// x [rows, b, h] (rows of `sequence`) with the site's mask applied: x itself when plan.p is 0.
at::Tensor hidden_dropout(const at::Tensor& x, const DropoutPlan& plan, std::int64_t layer,
                          GptDropoutSite site, const SequenceRows& sequence);

/// probabilities [b, heads here, s, s], heads [first_head, first_head + heads here) of `heads`,
/// with the attention-probability mask of `layer` applied: itself when plan.p is 0.
at::Tensor attention_dropout(const at::Tensor& probabilities, const DropoutPlan& plan,
                             std::int64_t layer, std::int64_t first_head, std::int64_t heads);

}  // namespace chorus::train::detail
