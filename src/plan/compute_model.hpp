// The planner's compute model from a compute profile (docs/planner.md, "Compute profiles"):
// each kind of computation (a block's forward, its backward, the head, the embedding) takes
// a fixed time (its operators' overhead, whatever their size) plus a time per unit of work
// (FLOPs, or elements for the embedding), fitted to the profile's times at its micro-batch
// sizes. One size gives the old model: no fixed time, the rate of that size for every size.
#pragma once

#include "plan/compute_profile.hpp"
#include "plan/model.hpp"

#include <vector>

namespace chorus::plan {

/// seconds(work) = fixed + per_unit · work.
struct CostLine {
  double fixed = 0;     ///< seconds whatever the work: the operators' fixed overhead
  double per_unit = 0;  ///< seconds per unit of work
  double seconds(double work) const { return fixed + per_unit * work; }
  bool measured() const { return fixed > 0 || per_unit > 0; }
};

/// The line through the points (work[i], seconds[i]) of least squared relative error, with
/// fixed >= 0 and per_unit >= 0 (a negative one is set to 0 and the other refitted); with one
/// distinct work: the line through the origin. Throws InvalidArgument for no point, a
/// mismatch of the two lists or a point that is not positive.
CostLine fit_cost_line(const std::vector<double>& work, const std::vector<double>& seconds);

/// Without a measured selective backward: the share of a block forward's fixed time that
/// selective recomputation runs again: the attention core's kernels (ones, triu, q·kᵀ, scale,
/// mask, softmax, ·v) are 7 of the 17 of Chorus's block forward.
constexpr double kAttentionCoreFixedShare = 7.0 / 17.0;

struct ComputeModel {
  CostLine block_forward;   ///< over block_forward_flops
  CostLine block_backward;  ///< over twice block_forward_flops
  /// A block's backward under selective recomputation, over twice block_forward_flops plus
  /// attention_core_flops; unmeasured: 0 (the backward plus the core's forward then).
  CostLine selective_backward;
  /// Under full recomputation, over three times block_forward_flops; unmeasured: 0 (the
  /// backward plus a forward then).
  CostLine full_backward;
  CostLine head;       ///< forward and backward over 3 · head_forward_flops; unmeasured: 0
  CostLine embedding;  ///< forward and backward over the rank's b·(s/u)·h embedded elements
  double optimizer_per_parameter = 0;  ///< seconds of the step (with clipping); 0: unmeasured
  /// Processes that computed at once while the profile was taken (its concurrency line).
  int concurrency = 1;
};

/// The lines fitted to `profile`'s sizes, each size's work by the planner's formulas on the
/// profile's block (its hidden, heads, seq, vocab, tp). The head's line needs the vocab line
/// and head times; the embedding's its times; the recomputation lines its recompute lines.
/// InvalidArgument naming the profile's problem.
ComputeModel fit_compute_model(const ComputeProfile& profile, std::string_view source);

/// The work of the embedding of one micro-batch on one rank: its b·(s/u)·h output elements.
double embedding_elements(const ModelConfig& model, const Layout& layout);

}  // namespace chorus::plan
