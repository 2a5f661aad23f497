// The compute model fitted to a compute profile (compute_model.hpp).
#include "plan/compute_model.hpp"

#include <chorus/error.hpp>

#include <cmath>
#include <string>

namespace chorus::plan {

CostLine fit_cost_line(const std::vector<double>& work, const std::vector<double>& seconds) {
  require_argument(!work.empty() && work.size() == seconds.size(),
                   "compute model: " + std::to_string(work.size()) + " works for " +
                       std::to_string(seconds.size()) + " times (at least one point each)");
  // Weighted least squares with weights 1/seconds²: every point's relative error counts alike.
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < work.size(); ++i) {
    require_argument(work[i] > 0 && seconds[i] > 0 && std::isfinite(work[i] + seconds[i]),
                     "compute model: point " + std::to_string(i) + " (work " +
                         std::to_string(work[i]) + ", " + std::to_string(seconds[i]) +
                         " s) is not positive");
    const double w = 1 / (seconds[i] * seconds[i]);
    s += w, sx += w * work[i], sy += w * seconds[i];
    sxx += w * work[i] * work[i], sxy += w * work[i] * seconds[i];
  }
  const double det = s * sxx - sx * sx;
  CostLine line;
  if (det > 1e-12 * s * sxx) {
    line.per_unit = (s * sxy - sx * sy) / det;
    line.fixed = (sy - line.per_unit * sx) / s;
  }
  if (det <= 1e-12 * s * sxx || line.fixed < 0) return {0, sxy / sxx};  // through the origin
  if (line.per_unit < 0) return {sy / s, 0};                            // a constant
  return line;
}

double embedding_elements(const ModelConfig& model, const Layout& layout) {
  return static_cast<double>(layout.micro_batch) * static_cast<double>(model.seq) / layout.cp *
         static_cast<double>(model.hidden);
}

namespace {

/// The selective and full recomputation backward lines from the profile's recompute lines.
void fit_recomputation(const ComputeProfile& profile, const ModelConfig& model, ComputeModel& out) {
  std::vector<double> selective_work, selective, full_work, full;
  for (const RecomputeTimes& t : profile.recompute) {
    Layout layout;
    layout.micro_batch = t.micro_batch;
    layout.tp = profile.tp;
    const double flops = block_forward_flops(model, layout);
    selective_work.push_back(2 * flops + attention_core_flops(model, layout));
    selective.push_back(t.selective_backward_ms * 1e-3);
    full_work.push_back(3 * flops);
    full.push_back(t.full_backward_ms * 1e-3);
  }
  out.selective_backward = fit_cost_line(selective_work, selective);
  out.full_backward = fit_cost_line(full_work, full);
}

}  // namespace

ComputeModel fit_compute_model(const ComputeProfile& profile, std::string_view source) {
  ModelConfig model;
  model.hidden = profile.hidden;
  model.heads = profile.heads;
  model.seq = profile.seq;
  model.vocab = profile.vocab > 0 ? profile.vocab : 1;
  const std::string problem = model.problem();
  require_argument(problem.empty(), std::string(source) + ": the profiled block: " + problem);
  std::vector<double> flops, forward, backward, head_flops, head, elements, embedding;
  for (const SizeTimes& t : profile.sizes()) {
    Layout layout;
    layout.micro_batch = t.micro_batch;
    layout.tp = profile.tp;
    flops.push_back(block_forward_flops(model, layout));
    forward.push_back(t.layer_forward_ms * 1e-3);
    backward.push_back(t.layer_backward_ms * 1e-3);
    head_flops.push_back(3 * head_forward_flops(model, layout));
    head.push_back(t.head_ms * 1e-3);
    elements.push_back(embedding_elements(model, layout));
    embedding.push_back(t.embedding_ms * 1e-3);
  }
  std::vector<double> twice;
  for (double f : flops) twice.push_back(2 * f);
  ComputeModel out;
  out.block_forward = fit_cost_line(flops, forward);
  out.block_backward = fit_cost_line(twice, backward);
  if (profile.vocab > 0 && profile.head_ms > 0) out.head = fit_cost_line(head_flops, head);
  if (profile.embedding_ms > 0) out.embedding = fit_cost_line(elements, embedding);
  out.optimizer_per_parameter = profile.optimizer_ns_per_parameter * 1e-9;
  out.concurrency = profile.concurrency;
  if (!profile.recompute.empty()) fit_recomputation(profile, model, out);
  return out;
}

}  // namespace chorus::plan
