// Ulysses context parallelism inside the GPT model (gpt.hpp): the sequence split over the cp
// group's u ranks everywhere but the attention core, which sees the whole sequence and a
// u-th of the heads.
//
// Rank c of the cp group holds rows [c·s/u, (c+1)·s/u) of every [s, b, ...] activation (under
// sequence parallelism its tp ranks split those rows again, in tp-rank order). Around the
// attention core two all-to-alls change the split: the fused QKV output [s/u, b, a/t, 3, d]
// becomes [s, b, a/(t·u), 3, d] (this rank's heads among the tp rank's, in cp-rank order), and
// the heads' context [s, b, a/(t·u), d] goes back to [s/u, b, a/t, d]. Backward runs the
// reverse all-to-all of each (autograd.hpp's sequence_to_heads / heads_to_sequence). Since q,
// k and v share one all-to-all, a block issues 2 all-to-alls forward and 2 backward, not 4.
//
// The loss is the sum of the rank's token losses divided by the group's token count, summed
// over cp (one all-reduce of a scalar forward, none backward): every cp rank returns the mean
// over the whole sequence, and the gradients of the replicated parameters summed over cp are
// the one-process gradients. A group of one rank (or none) is the model without cp: no
// collective, the same operations as before.
#pragma once

#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace chorus::train::detail {

class ContextSplit {
 public:
  ContextSplit() = default;
  explicit ContextSplit(const Group& cp) : cp_(cp) {}

  /// The degree u (1 without a group).
  int size() const { return cp_ ? cp_->size() : 1; }
  int rank() const { return cp_ ? cp_->rank() : 0; }
  const std::optional<Group>& group() const { return cp_; }

  /// This rank's rows [rank·s/u, (rank+1)·s/u) of `x` [s, ...]; InvalidArgument naming the
  /// numbers when s is not a multiple of u.
  at::Tensor local_rows(const at::Tensor& x) const;
  /// The global position of this rank's first row of a sequence of `s` tokens.
  std::int64_t first_row(std::int64_t s) const { return s / size() * rank(); }
  /// [s/u, b, heads, ...] -> [s, b, heads/u, ...] (heads_dim 2).
  at::Tensor to_heads(const at::Tensor& x) const;
  /// [s, b, heads/u, ...] -> [s/u, b, heads, ...].
  at::Tensor to_sequence(const at::Tensor& x) const;
  /// The mean over the cp group's tokens of `per_token` (this rank's token losses), the same
  /// scalar on every rank.
  at::Tensor mean(const at::Tensor& per_token) const;
  /// `value` summed over the cp group, in place (one all-reduce; nothing without cp). Not
  /// differentiable: for reported values.
  void sum(at::Tensor& value) const;

 private:
  bool split() const { return cp_ && cp_->size() > 1; }
  std::optional<Group> cp_;
};

/// InvalidArgument with a sentence naming the numbers unless the heads per tp rank (a/t) and
/// the sequence (s, or s/t under sequence parallelism) are multiples of u. `t` and `u` are
/// the tp and cp degrees.
void check_context_parallel(const GptConfig& config, int t, int u);

}  // namespace chorus::train::detail
