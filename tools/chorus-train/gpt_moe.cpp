// The MoE side of chorus-train's GPT run; see gpt_moe.hpp.
#include "gpt_moe.hpp"

#include <chorus/error.hpp>

#include <cstdio>

namespace chorus::train_tool {

train::GptMoeConfig moe_config(const Options& o) {
  if (o.moe_experts == 0) return {};
  return {.experts = o.moe_experts,
          .every = o.moe_every,
          .routing = {.top_k = o.moe_top_k,
                      .capacity_factor = o.moe_capacity,
                      .dropless = o.moe_dropless,
                      .group_tokens = o.moe_group_tokens},
          .aux_loss_coef = o.moe_aux_loss,
          .z_loss_coef = o.moe_z_loss};
}

std::string moe_description(const Options& o, const train::Mesh& mesh) {
  if (o.moe_experts == 0) return "";
  char capacity[32];
  std::snprintf(capacity, sizeof capacity, "%g", o.moe_capacity);
  return "; moe " + std::to_string(o.moe_experts) + " experts top-k " +
         std::to_string(o.moe_top_k) + " capacity " +
         (o.moe_dropless ? std::string("dropless") : std::string(capacity)) + " every " +
         std::to_string(o.moe_every) + ", ep " + std::to_string(mesh.layout().ep);
}

bool is_expert_parameter(const std::string& name) {
  return name.find(".moe.experts.") != std::string::npos;
}

MoeGradients::MoeGradients(const std::vector<train::GptParameter>& parameters,
                           const train::Mesh& mesh, const train::ReducerOptions& options) {
  std::vector<at::Tensor> experts, dense;
  for (const train::GptParameter& p : parameters)
    (is_expert_parameter(p.name) ? experts : dense).push_back(p.tensor);
  experts_ = std::make_unique<train::GradientReducer>(experts, mesh.expert_data(), options);
  dense_ = std::make_unique<train::GradientReducer>(dense, mesh.data_context(), options);
}

void MoeGradients::begin_step() {
  experts_->begin_step();
  dense_->begin_step();
}

void MoeGradients::finish_step() {
  for (train::GradientReducer* r : {experts_.get(), dense_.get()}) {
    for (std::size_t i = 0; i < r->parameters().size(); ++i) r->mark_ready(i);
    r->finish_step();
  }
}

std::vector<train::NormPiece> moe_norm_pieces(std::vector<train::NormPiece> pieces,
                                              const std::vector<train::GptParameter>& parameters) {
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (is_expert_parameter(parameters[i].name))
      pieces[i].placements.at(2) = train::GradPlacement::Sharded;  // over ep
  return pieces;
}

std::string moe_progress(const train::GptMoeCounters& c, bool counts, std::int64_t experts,
                         Communicator& comm) {
  const auto e = static_cast<std::size_t>(experts);
  std::vector<double> sums(e + 4, 0.0);  // kept per expert, assignments, dropped, aux, forwards
  if (counts) {
    for (std::size_t i = 0; i < c.kept.size() && i < e; ++i)
      sums[i] = static_cast<double>(c.kept[i]);
    sums[e] = static_cast<double>(c.assignments);
    sums[e + 1] = static_cast<double>(c.dropped);
    sums[e + 2] = c.aux_loss;
    sums[e + 3] = static_cast<double>(c.layer_forwards);
  }
  comm.all_reduce(sums.data(), sums.data(), sums.size(), DataType::Float64, ReduceOp::Sum);
  std::string text = " experts ";
  for (std::size_t i = 0; i < e; ++i)
    text.append(i == 0 ? "" : "/").append(std::to_string(static_cast<long long>(sums[i])));
  char tail[80];
  std::snprintf(tail, sizeof tail, " drop %.4f aux %.6g", sums[e] > 0 ? sums[e + 1] / sums[e] : 0.0,
                sums[e + 3] > 0 ? sums[e + 2] / sums[e + 3] : 0.0);
  return text + tail;
}

}  // namespace chorus::train_tool
