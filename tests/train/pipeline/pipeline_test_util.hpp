// Shared pieces of the pipelined GPT tests: a small fp64 model, deterministic batches, SGD,
// and a mesh's pipeline groups.
#pragma once

#include <chorus/train/pipeline.hpp>

#include "../tensor_parallel/tp_test_util.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chorus::train::pp_test {

inline constexpr double kLearningRate = 0.4;

inline GptConfig config(std::int64_t layers) {
  return {.layers = layers,
          .hidden = 8,
          .heads = 2,
          .vocab = 10,
          .sequence = 6,
          .seed = 5,
          .init_std = 0.3,
          .dtype = at::kDouble};
}

/// Step `step`'s batch of `samples` sequences of `length` tokens: tokens and targets [s, b].
inline std::pair<at::Tensor, at::Tensor> batch(int step, std::int64_t samples,
                                               std::int64_t length = 6) {
  const at::Tensor n = at::arange(length * samples, at::kLong) + 11 * step;
  return {(n * 7 + 3).remainder(10).view({length, samples}),
          (n * 5 + 1 + step).remainder(10).view({length, samples})};
}

/// p ← p − kLearningRate · grad, then the gradient zeroed.
inline void sgd_step(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    p.sub_(p.grad() * kLearningRate);
    p.mutable_grad().zero_();
  }
}

inline PipelineGroups groups_of(const Mesh& mesh) {
  const int p = mesh.layout().pp, stage = mesh.coordinates().pp;
  std::optional<Group> embedding;
  if (p > 1 && (stage == 0 || stage == p - 1)) embedding = mesh.embedding();
  return {mesh.pp(), mesh.tp(), embedding, std::nullopt};
}

inline PipelineOptions options(ScheduleKind kind, int p, int m, int v = 1,
                               std::vector<std::int64_t> layers = {}) {
  return {.schedule = {kind, p, m, v},
          .layers_per_stage = std::move(layers),
          .costs = {},
          .stage_costs = {}};
}

/// `schedule`, balanced by parameter count.
inline PipelineOptions options(const ScheduleOptions& schedule) {
  return {.schedule = schedule, .layers_per_stage = {}, .costs = {}, .stage_costs = {}};
}

/// The reference model's parameters by logical name.
inline std::map<std::string, at::Tensor> by_name(const GptModel& reference) {
  std::map<std::string, at::Tensor> out;
  for (const GptParameter& q : reference.named_parameters()) out[q.name] = q.tensor;
  return out;
}

/// After a step's backward: every pipeline gradient equals the reference's of the same name;
/// then both take an SGD step.
inline void expect_gradients_then_step(const GptPipeline& pipeline, const GptModel& reference,
                                       const std::map<std::string, at::Tensor>& expected) {
  for (const GptParameter& q : pipeline.named_parameters())
    tp_test::expect_close(q.tensor.grad(), expected.at(q.name).grad(), q.name + " gradient");
  sgd_step(pipeline.parameters());
  sgd_step(reference.parameters());
}

/// After the last step: every pipeline parameter equals the reference's.
inline void expect_parameters(const GptPipeline& pipeline,
                              const std::map<std::string, at::Tensor>& expected) {
  for (const GptParameter& q : pipeline.named_parameters())
    tp_test::expect_close(q.tensor.detach(), expected.at(q.name).detach(), q.name);
}

}  // namespace chorus::train::pp_test
