// ZeRO stage 3 (FSDP): parameters, gradients and optimizer state all sharded over the
// data-parallel group (libchorus_train, src/train/sharded/).
//
// The parameters are grouped into units (a layer, a GPT block: whatever the caller names, every
// parameter in exactly one). A unit is one flat buffer laid out like a ZeRO bucket (its
// parameters end to end, padded to a multiple of the group's size d); rank r keeps only block r
// of it (the unit's parameter shard, which the optimizer steps). Its parameters are gathered
// into a whole buffer only around their use:
//
//   zero.zero_grad();
//   zero.begin_step();                      // or begin_weighted_step(samples, samples)
//   x = zero.run_unit(0, x, layer0);        // all-gather unit 0 (prefetching unit 1), run,
//   x = zero.run_unit(1, x, layer1);        //   free it again (reshard_after_forward)
//   loss(x).backward();                     // each unit all-gathered again before its backward,
//                                           //   freed and its gradient reduce-scattered into
//                                           //   the fp32 shard as soon as its backward ends
//   zero.finish_step();                     // every reduce-scatter done
//   zero.clip_grad_norm(1.0);               // optional: the global norm over the shards
//   zero.step();                            // the optimizer steps the shards; nothing else
//
// run_unit(u, input, body) gathers unit u (waiting for its prefetch), issues the gathers of up
// to `prefetch` units that come next (the order of the previous step's run_unit calls, or of
// the unit list in the first step), runs body(input) and frees the unit's buffer unless
// reshard_after_forward is false. Its output passes through an identity autograd node whose
// backward gathers the unit again when it is not gathered and prefetches the units of the
// calls before it. A unit may be run more than once per forward (the GPT's tied embedding:
// embed and head); its buffer is then freed when the last of its gradients has arrived.
// Outside run_unit the parameters hold no memory: reading them is an error (full_parameters()
// gathers copies). Without gradient recording (evaluation under a no-grad guard) run_unit
// gathers only its unit, frees it after body and leaves the step's prefetch order alone.
//
// Communication per step (recorded in the group's ledger), for each unit of Ψ_u padded
// elements: one all-gather of Ψ_u per forward call (when it is not gathered already) and one
// per backward that finds it freed, one reduce-scatter of Ψ_u (DDP's volume × 1.5 with
// resharding). Nothing is issued on a group of one rank.
//
// Memory per rank, fp32 Adam (PARALLEL.md section 3): 4Ψ/d parameter shards + 4Ψ/d gradient
// shards + 8Ψ/d optimizer state = 16Ψ/d between steps (Ψ with the units' padding), plus during
// a step the units gathered (at most prefetch + 1 with resharding) and one unit's gradients.
//
// Mixed precision (Zero3Options::mixed_precision = bf16 or fp16; the parameters must be fp32):
// each rank keeps its block of every unit twice, as the fp32 master (the optimizer's) and as
// its rounding to the half type, which the all-gathers send; the gathered parameters, their
// gradients and the reduce-scatters are in the half type; step() upcasts the gradient shards
// into the masters' gradients (freed after the step) and rounds the stepped masters into the
// half blocks. Memory per rank, Adam: 4Ψ/d masters + 2Ψ/d half blocks + 2Ψ/d gradient shards +
// 8Ψ/d state = 16Ψ/d (PARALLEL.md's mixed-precision ZeRO-3 line), the gathered units in the
// half type. torch 1.13 has no fp16 matrix products on CPU: an fp16 unit computes through fp32
// copies of its parameters (autograd casts the gradients back).
//
// Errors are chorus::Error: InvalidArgument for bad parameters, units or options (all checked
// before anything is changed, the same on every rank), InvalidUsage for calls out of order.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/zero.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace chorus::train {

class GptModel;

struct Zero3Options {
  /// True (ZeRO-3): a unit's gathered parameters are freed after its forward and gathered again
  /// for its backward. False (ZeRO-2 behaviour, FSDP's SHARD_GRAD_OP): kept from the forward
  /// until the unit's backward ends.
  bool reshard_after_forward = true;
  /// The most unit all-gathers in flight ahead of the unit computing (forward and backward);
  /// 0: each unit is gathered when it is needed.
  std::size_t prefetch = 1;
  bool overlap_backward = true;  ///< reduce-scatters start as units' backwards end
  /// Copies rank 0's parameters to every rank at construction (one broadcast per unit).
  bool broadcast_parameters = true;
  /// Mixed precision (see the header comment): at::kBFloat16 or at::kHalf; nullopt: off.
  std::optional<at::ScalarType> mixed_precision{};
};

class CHORUS_EXPORT Zero3 {
 public:
  /// Collective over group.comm. `units` are indices into `params`, each unit in the order its
  /// parameters are laid out. InvalidArgument, before anything changes, for an empty or
  /// out-of-range unit, a parameter in no unit or in two, a unit of two dtypes, a parameter
  /// that is not a floating CPU leaf requiring a gradient, the same tensor twice, or an
  /// optimizer that does not hold exactly the unit shards it was given (one flat tensor per
  /// unit). Then every parameter is re-seated onto its unit's buffer, which is freed.
  Zero3(std::vector<at::Tensor> params, std::vector<std::vector<std::size_t>> units, Group group,
        const ShardOptimizerFactory& make, Zero3Options options = {});
  ~Zero3();
  Zero3(const Zero3&) = delete;
  Zero3& operator=(const Zero3&) = delete;

  /// body(input) with unit `unit`'s parameters gathered (see the header comment). Collective
  /// when it gathers. InvalidArgument for a unit out of range.
  at::Tensor run_unit(std::size_t unit, const at::Tensor& input,
                      const std::function<at::Tensor(const at::Tensor&)>& body);

  /// Frees any param.grad() left: nothing is held between steps.
  void zero_grad();
  /// As GradientReducer's begin_step / begin_weighted_step.
  void begin_step();
  void begin_weighted_step(std::int64_t weight, std::int64_t samples);
  /// Waits for every reduce-scatter and frees every gathered unit: gradient_shards() then hold
  /// this step's mean gradient. Collective.
  void finish_step();
  /// As ZeroOptimizer::clip_grad_norm. Collective (one fp64 all-reduce).
  double clip_grad_norm(double max_norm);
  /// The optimizer's step on the shards (the next forward gathers the new values).
  /// InvalidUsage while a step is active.
  void step();
  /// After this rank's parameter shards were written from outside (a sharded checkpoint's
  /// load): with mixed precision rounds the fp32 masters into the half blocks the gathers send
  /// (nothing otherwise: the next forward gathers the shards). Local; call it between steps.
  void refresh_from_shards();

  /// Every parameter's whole value, copied (one all-gather per unit, the units not left
  /// gathered): for evaluation and comparison. Collective.
  std::vector<at::Tensor> full_parameters();
  /// The same from the optimizer's shards (with mixed precision the fp32 masters). Collective.
  std::vector<at::Tensor> master_parameters();

  torch::optim::Optimizer& optimizer();
  const GradientReducer& reducer() const;
  /// Each unit's layout (params, offsets, numel, padded_numel, type: the gathered type), in
  /// unit order.
  const std::vector<BucketLayout>& unit_layouts() const;
  /// This rank's shards, one per unit: parameters (the optimizer's: with mixed precision the
  /// fp32 masters) and reduced gradients (in the units' type).
  std::vector<at::Tensor> parameter_shards() const;
  std::vector<at::Tensor> gradient_shards() const;
  /// Where this rank's shards lie in the parameters (shard k is unit k's); see ShardPiece.
  std::vector<ShardPiece> shard_layout() const;

  struct Memory {
    std::int64_t parameters = 0;  ///< the shards (masters and half blocks), the units gathered
    std::int64_t gradients = 0;   ///< GradientReducer::gradient_bytes()
    std::int64_t optimizer_state = 0;
    /// The most gathered-unit bytes alive at once since construction or reset_peak().
    std::int64_t peak_gathered = 0;
  };
  /// InvalidArgument as ZeroOptimizer::memory().
  Memory memory() const;
  void reset_peak();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// The GPT model's units for Zero3 over model.parameters(): unit 0 the embedding (tied with the
/// logits), the position embedding and the final norm; unit 1 + i block i.
CHORUS_EXPORT std::vector<std::vector<std::size_t>> gpt_units(const GptModel& model);

/// GptModel::loss(tokens, targets) with each unit run through zero.run_unit (unit 0 for the
/// embedding and again for the head). `zero` must have been built over model.parameters()
/// with gpt_units(model). InvalidArgument for a model split over more than one cp rank.
CHORUS_EXPORT at::Tensor gpt_loss(const GptModel& model, Zero3& zero, const at::Tensor& tokens,
                                  const at::Tensor& targets);

}  // namespace chorus::train
