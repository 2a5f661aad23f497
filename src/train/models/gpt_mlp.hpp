// A GPT block's MLP: Megatron's dense h -> 4h -> h (ColumnParallelLinear, GELU,
// RowParallelLinear) or, in the blocks GptMoeConfig picks, an MoeLayer over the expert group
// (gpt.hpp, "GptMoeConfig"). The MoE layer sees a rank's tokens sample-major; its aux and z
// losses enter the gradient through an identity on its output whose backward also passes the
// losses' weight (the model's scale over the cp degree) to them.
#pragma once

#include <chorus/train/gpt.hpp>
#include <chorus/train/moe.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train::detail {

inline ParameterInit layer_init(const GptConfig& c, const std::string& name, double std) {
  return {.seed = c.seed, .name = name, .init_std = std, .dtype = c.dtype};
}
inline ColumnParallelOptions column_options(const GptConfig& c) {
  return {.sequence_parallel = c.sequence_parallel,
          .defer_weight_gradient = c.defer_weight_gradients};
}
inline RowParallelOptions row_options(const GptConfig& c) {
  return {.sequence_parallel = c.sequence_parallel,
          .defer_weight_gradient = c.defer_weight_gradients};
}
/// The init std of each block's two output projections (GPT-2): init_std / sqrt(2L).
inline double output_std(const GptConfig& c) {
  return c.init_std / std::sqrt(2.0 * static_cast<double>(c.layers));
}

/// Whether block `i` of `c` has an MoE MLP.
inline bool is_moe_block(const GptConfig& c, std::int64_t i) {
  return c.moe.experts > 0 && i % c.moe.every == 0;
}

/// InvalidArgument naming the numbers for an MoE configuration the model cannot run (see
/// GptModel's four-group constructor); nothing without MoE blocks. `has_ep`: an expert group
/// was given.
void check_moe_config(const GptConfig& c, bool has_ep);

/// What a model's MoE blocks share: the loss weight and the counters.
struct GptMoeState {
  double loss_scale = 1;    ///< set_moe_loss_scale's
  int context_ranks = 1;    ///< u: each cp rank's losses cover a u-th of the groups
  GptMoeCounters counters;  ///< since the last take
};

class GptMlp {
 public:
  /// The dense MLP of block `index`, or its MoE layer (over `ep`) when is_moe_block.
  GptMlp(const GptConfig& c, const Group& tp, const std::optional<Group>& ep, std::int64_t index,
         std::shared_ptr<GptMoeState> state);

  /// [rows, b, h] -> [rows, b, h]: the MLP branch (before dropout and the residual add).
  at::Tensor forward(const at::Tensor& x) const;

  /// The parameters as the model names them ("<block>.mlp.fc1.weight", or the MoE layer's
  /// router and this rank's experts, replicated over tp).
  std::vector<GptParameter> named_parameters() const;
  std::vector<at::Tensor> parameters() const;
  std::vector<at::Tensor> partial_gradient_parameters() const;
  std::size_t compute_weight_gradients() const;
  std::size_t pending_weight_gradients() const;
  /// The MoE layer, or null for a dense MLP.
  const MoeLayer* moe() const { return moe_.get(); }

 private:
  std::string name_;               ///< "layers.<i>"
  std::int64_t group_tokens_ = 0;  ///< the configured routing group; 0: one sample's sequence
  std::optional<ColumnParallelLinear> fc1_;
  std::optional<RowParallelLinear> fc2_;
  std::unique_ptr<MoeLayer> moe_;
  std::shared_ptr<GptMoeState> state_;
};

}  // namespace chorus::train::detail
