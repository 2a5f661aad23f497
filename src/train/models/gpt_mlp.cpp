// A GPT block's MLP, dense or mixture of experts; see gpt_mlp.hpp.
#include "gpt_mlp.hpp"

#include <chorus/error.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <sstream>
#include <utility>

namespace chorus::train::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// output unchanged; in backward the scalar `loss` receives the gradient `scale`, as if
/// scale·loss had been added to the objective (Megatron's MoEAuxLossAutoScaler).
struct AttachLoss : torch::autograd::Function<AttachLoss> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& output, const at::Tensor& loss,
                            double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dtype"] = loss.scalar_type();
    return output.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::ScalarType dtype = ctx->saved_data["dtype"].toScalarType();
    return {grads[0], at::full({}, scale, at::TensorOptions().dtype(dtype)), at::Tensor()};
  }
};

MoeOptions moe_options(const GptConfig& c, std::int64_t index) {
  return {.hidden = c.hidden,
          .ffn = c.moe.ffn > 0 ? c.moe.ffn : 4 * c.hidden,
          .experts = c.moe.experts,
          .routing = c.moe.routing,
          .aux_loss_coef = c.moe.aux_loss_coef,
          .z_loss_coef = c.moe.z_loss_coef,
          .seed = c.seed,
          .name = "layers." + std::to_string(index) + ".moe",
          .init_std = c.init_std,
          .dtype = c.dtype};
}

void add_counts(GptMoeCounters& counters, const MoeStats& stats, const MoeOutput& out) {
  if (counters.kept.size() < stats.kept.size()) counters.kept.resize(stats.kept.size(), 0);
  for (std::size_t e = 0; e < stats.kept.size(); ++e) counters.kept[e] += stats.kept[e];
  counters.assignments += stats.assignments;
  counters.dropped += stats.dropped;
  counters.aux_loss += out.aux_loss.item<double>();
  counters.z_loss += out.z_loss.item<double>();
  counters.layer_forwards += 1;
}

}  // namespace

void check_moe_config(const GptConfig& c, bool has_ep) {
  if (c.moe.experts == 0) return;
  const auto number = [](std::int64_t v) { return std::to_string(v); };
  require_argument(c.moe.experts > 0 && c.moe.every >= 1 && c.moe.ffn >= 0,
                   "GptModel: MoE experts " + number(c.moe.experts) + ", every " +
                       number(c.moe.every) + ", ffn " + number(c.moe.ffn) +
                       " (experts and every must be positive, ffn not negative)");
  require_argument(has_ep, "GptModel: MoE blocks need the expert group (the constructor with ep)");
  require_argument(!c.sequence_parallel,
                   "GptModel: MoE blocks do not run under sequence parallelism");
  require_argument(c.recompute != Recompute::Full,
                   "GptModel: MoE blocks do not run under full recomputation (selective does)");
}

GptMlp::GptMlp(const GptConfig& c, const Group& tp, const std::optional<Group>& ep,
               std::int64_t index, std::shared_ptr<GptMoeState> state)
    : name_("layers." + std::to_string(index)),
      group_tokens_(c.moe.routing.group_tokens),
      state_(std::move(state)) {
  if (is_moe_block(c, index)) {
    moe_ = std::make_unique<MoeLayer>(moe_options(c, index), *ep);
    return;
  }
  fc1_.emplace(c.hidden, 4 * c.hidden, tp, layer_init(c, name_ + ".mlp.fc1", c.init_std),
               column_options(c));
  fc2_.emplace(4 * c.hidden, c.hidden, tp, layer_init(c, name_ + ".mlp.fc2", output_std(c)),
               row_options(c));
}

at::Tensor GptMlp::forward(const at::Tensor& x) const {
  if (!moe_) return fc2_->forward(at::gelu(fc1_->forward(x)));
  const std::int64_t rows = x.size(0), u = state_->context_ranks;
  const std::int64_t group = group_tokens_ > 0 ? group_tokens_ : rows * u;
  require_argument(u == 1 || rows % group == 0,
                   "GptModel: MoE routing groups of " + std::to_string(group) +
                       " tokens do not divide the " + std::to_string(rows) +
                       " tokens of a sample a cp rank holds");
  moe_->set_group_tokens(group);
  const MoeOutput out = moe_->forward(x.transpose(0, 1));  // sample-major tokens
  if (at::GradMode::is_enabled()) add_counts(state_->counters, moe_->last_stats(), out);
  const double scale = state_->loss_scale / static_cast<double>(u);
  return AttachLoss::apply(out.output, out.aux_loss + out.z_loss, scale).transpose(0, 1);
}

std::vector<GptParameter> GptMlp::named_parameters() const {
  if (!moe_)
    return {{name_ + ".mlp.fc1.weight", fc1_->weight(), 0},
            {name_ + ".mlp.fc1.bias", fc1_->bias(), 0},
            {name_ + ".mlp.fc2.weight", fc2_->weight(), 1},
            {name_ + ".mlp.fc2.bias", fc2_->bias(), -1}};
  std::vector<GptParameter> out{{moe_->options().name + ".router.weight", moe_->router_weight()}};
  for (std::int64_t e = 0; e < moe_->local_experts(); ++e) {
    const std::int64_t g = moe_->first_expert() + e;
    out.push_back({moe_->expert_parameter_name(g, "fc1.weight"), moe_->fc1_weight(e)});
    out.push_back({moe_->expert_parameter_name(g, "fc1.bias"), moe_->fc1_bias(e)});
    out.push_back({moe_->expert_parameter_name(g, "fc2.weight"), moe_->fc2_weight(e)});
    out.push_back({moe_->expert_parameter_name(g, "fc2.bias"), moe_->fc2_bias(e)});
  }
  return out;
}

std::vector<at::Tensor> GptMlp::parameters() const {
  std::vector<at::Tensor> out;
  for (const GptParameter& p : named_parameters()) out.push_back(p.tensor);
  return out;
}

std::vector<at::Tensor> GptMlp::partial_gradient_parameters() const {
  return fc2_ ? fc2_->partial_gradient_parameters() : std::vector<at::Tensor>{};
}

std::size_t GptMlp::compute_weight_gradients() const {
  return fc1_ ? fc1_->compute_weight_gradients() + fc2_->compute_weight_gradients() : 0;
}

std::size_t GptMlp::pending_weight_gradients() const {
  return fc1_ ? fc1_->pending_weight_gradients() + fc2_->pending_weight_gradients() : 0;
}

}  // namespace chorus::train::detail
