// The MoE layer; see include/chorus/train/moe.hpp.
//
// forward: router -> route_tokens -> plan_dispatch (counts) -> moe_dispatch -> one GELU MLP per
// local expert on its contiguous block of received rows -> moe_combine. The aux and z losses
// come from the router's logits and probabilities of this rank's tokens only.
#include "../tensor_parallel/parameters.hpp"
#include "routing_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/moe.hpp>

#include <ATen/ATen.h>

#include <string>

namespace chorus::train {

namespace {

void check_sizes(const MoeOptions& o, const Group& ep) {
  for (auto [what, value] :
       {std::pair{"hidden", o.hidden}, std::pair{"ffn", o.ffn}, std::pair{"experts", o.experts}})
    require_argument(value > 0, std::string("MoeLayer: ") + what + " " + std::to_string(value) +
                                    " is not positive");
  require_argument(o.experts % ep.size() == 0, "MoeLayer: " + std::to_string(o.experts) +
                                                   " experts are not a multiple of the " + ep.name +
                                                   " group's " + std::to_string(ep.size()) +
                                                   " ranks");
  detail::check_routing_options(o.routing, o.experts);
}

ParameterInit init_of(const MoeOptions& o, const std::string& name) {
  return {.seed = o.seed, .name = name, .init_std = o.init_std, .dtype = o.dtype};
}

}  // namespace

MoeLayer::MoeLayer(const MoeOptions& options, const Mesh& mesh)
    : MoeLayer(options, mesh.expert()) {}

MoeLayer::MoeLayer(const MoeOptions& options, const Group& ep) : options_(options), ep_(ep) {
  check_sizes(options, ep_);
  const std::int64_t h = options.hidden, ffn = options.ffn;
  const std::int64_t local = options.experts / ep_.size();
  first_expert_ = local * ep_.rank();
  router_weight_ = detail::weight_slice(init_of(options, options.name + ".router"),
                                        {options.experts, h}, 0, 0, options.experts);
  for (std::int64_t g = first_expert_; g < first_expert_ + local; ++g) {
    const std::string prefix = options.name + ".experts." + std::to_string(g);
    fc1_weight_.push_back(
        detail::weight_slice(init_of(options, prefix + ".fc1"), {ffn, h}, 0, 0, ffn));
    fc1_bias_.push_back(detail::zero_parameter({ffn}, options.dtype));
    fc2_weight_.push_back(
        detail::weight_slice(init_of(options, prefix + ".fc2"), {h, ffn}, 0, 0, h));
    fc2_bias_.push_back(detail::zero_parameter({h}, options.dtype));
  }
}

void MoeLayer::set_group_tokens(std::int64_t tokens) {
  MoeRoutingOptions routing = options_.routing;
  routing.group_tokens = tokens;
  detail::check_routing_options(routing, options_.experts);
  options_.routing = routing;
}

at::Tensor MoeLayer::run_experts(const at::Tensor& rows, const DispatchPlan& plan) const {
  std::vector<at::Tensor> outputs;
  std::int64_t offset = 0;
  for (std::size_t e = 0; e < fc1_weight_.size(); ++e) {
    const at::Tensor block = rows.narrow(0, offset, plan.expert_rows[e]);
    offset += plan.expert_rows[e];
    const at::Tensor inner = at::gelu(at::linear(block, fc1_weight_[e], fc1_bias_[e]));
    outputs.push_back(at::linear(inner, fc2_weight_[e], fc2_bias_[e]));
  }
  return at::cat(outputs, 0);
}

MoeOutput MoeLayer::forward(const at::Tensor& x) {
  detail::require_last_dim("MoeLayer", x, options_.hidden);
  const at::Tensor flat = x.reshape({-1, options_.hidden});
  const std::int64_t tokens = flat.size(0);
  const at::Tensor logits = at::linear(flat, router_weight_);
  const at::Tensor probs = at::softmax(logits, 1);
  const MoeRouting routing = route_tokens(probs, options_.routing);
  MoeOutput out;
  out.aux_loss =
      load_balancing_loss(probs, routing, options_.routing.group_tokens, options_.aux_loss_coef);
  out.z_loss = options_.z_loss_coef == 0 || tokens == 0
                   ? at::zeros({}, probs.options())
                   : options_.z_loss_coef * at::logsumexp(logits, 1).pow(2).mean();
  const DispatchPlan plan = plan_dispatch(routing, options_.experts, ep_);
  const at::Tensor rows = moe_dispatch(flat, routing, plan, ep_);
  out.output = moe_combine(run_experts(rows, plan), routing, plan, ep_, tokens).reshape(x.sizes());
  stats_ = {.routed = routing.routed,
            .kept = routing.kept,
            .received = plan.expert_rows,
            .assignments = tokens * options_.routing.top_k,
            .token = routing.token,
            .expert = routing.expert};
  for (std::int64_t n : routing.kept) stats_.dropped -= n;
  stats_.dropped += stats_.assignments;
  return out;
}

std::vector<at::Tensor> MoeLayer::expert_parameters() const {
  std::vector<at::Tensor> out;
  for (std::size_t e = 0; e < fc1_weight_.size(); ++e)
    out.insert(out.end(), {fc1_weight_[e], fc1_bias_[e], fc2_weight_[e], fc2_bias_[e]});
  return out;
}

std::string MoeLayer::expert_parameter_name(std::int64_t expert, const char* part) const {
  return options_.name + ".experts." + std::to_string(expert) + "." + part;
}

MoeGradientReducers::MoeGradientReducers(const Mesh& mesh, std::vector<at::Tensor> expert_params,
                                         std::vector<at::Tensor> dense_params,
                                         ReducerOptions options) {
  ReducerOptions expert_options = options;
  expert_options.divisor = mesh.layout().size(MeshGroup::DataContext);
  experts_ = std::make_unique<GradientReducer>(std::move(expert_params), mesh.expert_data(),
                                               expert_options);
  dense_ = std::make_unique<GradientReducer>(std::move(dense_params), mesh.data_context(), options);
}

void MoeGradientReducers::begin_step() {
  experts_->begin_step();
  dense_->begin_step();
}

void MoeGradientReducers::finish_step() {
  experts_->finish_step();
  dense_->finish_step();
}

}  // namespace chorus::train
