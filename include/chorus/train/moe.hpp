// Mixture of experts with expert parallelism over all-to-all-v (PARALLEL.md sections 2 and 3).
//
// MoeLayer replaces a transformer block's MLP: [..., h] -> [..., h], the MLP branch only (the
// block adds the residual, so a token every expert dropped passes through as x + 0).
//
//   router     logits = x · Wᵀ (W [E, h], no bias), probs = softmax(logits)
//   top-k      k ∈ {1, 2}; k = 1: gate = the raw probability (a renormalised top-1 gate is
//              always 1 and the router would learn nothing from the loss); k = 2: the two
//              probabilities renormalised to sum to 1
//   capacity   tokens are routed in groups of `group_tokens`; per group each expert keeps at
//              most ceil(T·k·capacity_factor/E) of its assignments, dropping the lowest router
//              probability first (ties: the higher token index first); a token dropped by one
//              of its two experts keeps the other's gated output, not renormalised. dropless
//              keeps every assignment.
//   experts    E GELU (erf) MLPs h -> ffn -> h, split over the mesh's expert group: rank r of
//              ep holds experts [r·E/ep, (r+1)·E/ep)
//   aux loss   per routing group α·E·Σ_i f_i·P_i, f_i = assignments the top-k sends to expert
//              i (before capacity) / (T·k), P_i = the mean router probability of expert i;
//              the layer's aux loss is the mean over its groups. Optional router z-loss
//              β·mean over tokens of logsumexp(logits)².
//
// Expert parallelism (ep = the expert group's size): dispatch permutes the kept assignments
// by destination rank (they are sorted by expert, then token), exchanges the per-expert counts
// (one all_to_all of E int64 on ep), sends the token rows with one all_to_all_v and groups the
// received rows by local expert (one matmul per local expert); combine sends the expert outputs
// back with the reverse all_to_all_v, un-permutes them and sums them per token weighted by the
// gates. Dispatch and combine are communicating autograd functions: the backward of dispatch is
// a combine's all_to_all_v and the reverse. Per forward and backward the ep group's ledger holds
// exactly: forward 1 all_to_all (counts) and 2 all_to_all_v (dispatch, combine), backward 2
// all_to_all_v (combine's reverse, then dispatch's reverse); on ep = 1 nothing.
//
// Gradients (PARALLEL.md section 2): expert parameters are summed over the expert-data-parallel
// group and divided by dp·cp; the router over dp·cp (MoeGradientReducers). Every weight comes
// from init_slice keyed by (seed, logical name), so the experts a rank holds at any ep are the
// one-process layer's experts of the same index.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train {

/// How tokens are assigned to experts.
struct MoeRoutingOptions {
  int top_k = 1;                 ///< 1 or 2
  double capacity_factor = 1.0;  ///< > 0 unless dropless
  bool dropless = false;         ///< keep every assignment (no capacity)
  /// Tokens per routing group; 0: all the tokens of one forward form one group. Must divide
  /// the number of tokens.
  std::int64_t group_tokens = 0;
};

/// Assignments of tokens to experts. The kept ones are sorted by expert, then token: the order
/// dispatch sends them in.
struct MoeRouting {
  at::Tensor topk_expert;            ///< int64 [N, k]: the top-k experts of each token, best first
  at::Tensor token;                  ///< int64 [A]: token of each kept assignment
  at::Tensor expert;                 ///< int64 [A]: its expert
  at::Tensor gate;                   ///< [A]: its gate, differentiable in the probabilities
  std::vector<std::int64_t> routed;  ///< [E]: assignments top-k made per expert
  std::vector<std::int64_t> kept;    ///< [E]: assignments kept per expert (after capacity)
};

/// The capacity of each expert in a routing group of `tokens` tokens: ceil(T·k·factor/E).
CHORUS_EXPORT std::int64_t expert_capacity(std::int64_t tokens, int top_k, double capacity_factor,
                                           std::int64_t experts);

/// Routes `probs` [N, E] (softmax outputs). InvalidArgument for a k outside {1, 2} or above E,
/// a capacity factor ≤ 0 without dropless, a group size that does not divide N.
CHORUS_EXPORT MoeRouting route_tokens(const at::Tensor& probs, const MoeRoutingOptions& options);

/// The load-balancing loss: the mean over routing groups of α·E·Σ_i f_i·P_i (see above).
CHORUS_EXPORT at::Tensor load_balancing_loss(const at::Tensor& probs, const MoeRouting& routing,
                                             std::int64_t group_tokens, double alpha);

/// How the kept assignments travel over the expert group (computed by plan_dispatch).
struct DispatchPlan {
  std::vector<std::int64_t> send_rows;    ///< [ep]: rows this rank sends to each rank
  std::vector<std::int64_t> recv_rows;    ///< [ep]: rows it receives from each rank
  std::vector<std::int64_t> expert_rows;  ///< [E/ep]: rows each local expert receives
  at::Tensor by_expert;  ///< int64: received (source-major) row of each expert-major row
  at::Tensor by_source;  ///< int64: expert-major row of each received row (the inverse)
};

/// Collective over `ep`: exchanges the per-expert counts of `routing` (sorted kept assignments
/// of `experts` experts) with one all_to_all. InvalidArgument when E is not a multiple of ep.
CHORUS_EXPORT DispatchPlan plan_dispatch(const MoeRouting& routing, std::int64_t experts,
                                         const Group& ep);

/// The rows x[token] of the kept assignments, sent to their experts' ranks: [R, h] grouped by
/// local expert (expert_rows[0] rows for the first local expert, ...). Differentiable in x.
CHORUS_EXPORT at::Tensor moe_dispatch(const at::Tensor& x, const MoeRouting& routing,
                                      const DispatchPlan& plan, const Group& ep);

/// The inverse: expert outputs [R, h] sent back and summed per token weighted by the gates,
/// [tokens, h]; tokens without a kept assignment are zero. Differentiable in y and the gates.
CHORUS_EXPORT at::Tensor moe_combine(const at::Tensor& y, const MoeRouting& routing,
                                     const DispatchPlan& plan, const Group& ep,
                                     std::int64_t tokens);

struct MoeOptions {
  std::int64_t hidden = 0;
  std::int64_t ffn = 0;
  std::int64_t experts = 0;
  MoeRoutingOptions routing = {};
  double aux_loss_coef = 1e-2;  ///< α
  double z_loss_coef = 0;       ///< β; 0: no z-loss
  std::uint64_t seed = 0;
  std::string name = "moe";  ///< prefix of the logical parameter names
  double init_std = 0.02;
  at::ScalarType dtype = at::kFloat;
};

/// What one forward returns.
struct MoeOutput {
  at::Tensor output;    ///< [..., h]: the MLP branch (zero for a token every expert dropped)
  at::Tensor aux_loss;  ///< scalar: the load-balancing loss (α·E·Σ f_i·P_i, mean over groups)
  at::Tensor z_loss;    ///< scalar: the router z-loss (0 when z_loss_coef is 0)
};

/// Counts of the last forward, for this rank's tokens.
struct MoeStats {
  std::vector<std::int64_t> routed;    ///< [E]: assignments top-k made per expert
  std::vector<std::int64_t> kept;      ///< [E]: assignments kept (sent) per expert
  std::vector<std::int64_t> received;  ///< [E/ep]: rows each local expert computed
  std::int64_t assignments = 0;        ///< N·k
  std::int64_t dropped = 0;            ///< assignments - Σ kept
  at::Tensor token, expert;            ///< int64: the kept assignments, sorted by expert then token
  double drop_rate() const {
    return assignments == 0 ? 0.0 : static_cast<double>(dropped) / assignments;
  }
};

class CHORUS_EXPORT MoeLayer {
 public:
  /// Experts split over mesh.expert(). InvalidArgument with a sentence naming the numbers for
  /// a size that is not positive, E not a multiple of ep, k outside {1, 2} or above E, a
  /// capacity factor ≤ 0 without dropless, a negative group size. (The mesh already refuses
  /// an ep that does not divide dp·cp.)
  MoeLayer(const MoeOptions& options, const Mesh& mesh);
  /// The same with the experts split over `ep` (the mesh's expert group).
  MoeLayer(const MoeOptions& options, const Group& ep);

  /// Collective over the expert group (every rank of it calls forward, with any token count).
  MoeOutput forward(const at::Tensor& x);

  const MoeOptions& options() const { return options_; }
  /// The routing group size of the next forwards (MoeRoutingOptions::group_tokens).
  /// InvalidArgument when negative.
  void set_group_tokens(std::int64_t tokens);
  const MoeStats& last_stats() const { return stats_; }
  /// The first global expert this rank holds; it holds local_experts() of them.
  std::int64_t first_expert() const { return first_expert_; }
  std::int64_t local_experts() const { return static_cast<std::int64_t>(fc1_weight_.size()); }

  const at::Tensor& router_weight() const { return router_weight_; }  ///< [E, h]
  /// Local expert e's parameters: fc1 [ffn, h] and [ffn], fc2 [h, ffn] and [h].
  const at::Tensor& fc1_weight(std::int64_t e) const { return fc1_weight_.at(e); }
  const at::Tensor& fc1_bias(std::int64_t e) const { return fc1_bias_.at(e); }
  const at::Tensor& fc2_weight(std::int64_t e) const { return fc2_weight_.at(e); }
  const at::Tensor& fc2_bias(std::int64_t e) const { return fc2_bias_.at(e); }
  /// The router: replicated over dp·cp.
  std::vector<at::Tensor> dense_parameters() const { return {router_weight_}; }
  /// This rank's experts' parameters, expert by expert (fc1 weight, fc1 bias, fc2 weight, bias).
  std::vector<at::Tensor> expert_parameters() const;
  /// Logical name of a global expert's parameter ("moe.experts.3.fc1.weight").
  std::string expert_parameter_name(std::int64_t expert, const char* part) const;

 private:
  at::Tensor run_experts(const at::Tensor& rows, const DispatchPlan& plan) const;

  MoeOptions options_;
  Group ep_;
  std::int64_t first_expert_ = 0;
  at::Tensor router_weight_;
  std::vector<at::Tensor> fc1_weight_, fc1_bias_, fc2_weight_, fc2_bias_;
  MoeStats stats_;
};

/// The gradient reduction of an MoE model (PARALLEL.md section 2): expert gradients summed over
/// the expert-data-parallel group and divided by dp·cp (not by that group's size), the rest of
/// the model averaged over dp·cp. Collective over both groups at construction.
class CHORUS_EXPORT MoeGradientReducers {
 public:
  MoeGradientReducers(const Mesh& mesh, std::vector<at::Tensor> expert_params,
                      std::vector<at::Tensor> dense_params, ReducerOptions options = {});
  void begin_step();
  /// Leaves the reduced gradients in every parameter's grad(). Collective.
  void finish_step();
  GradientReducer& experts() { return *experts_; }
  GradientReducer& dense() { return *dense_; }

 private:
  std::unique_ptr<GradientReducer> experts_, dense_;
};

}  // namespace chorus::train
