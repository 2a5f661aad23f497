// The pipelined GPT against the one-process model (PARALLEL.md section 4.1): for p 1-4 and
// m in {1, p, 3p + 1} where the schedule allows it, the loss every step and every parameter
// after three SGD steps equal those of the GPT model over the whole batch in one process
// (threads as ranks, fp64, rtol 1e-10, tied embeddings across the first and last stage); the
// ledger's point-to-point messages; mismatched shapes named; bad layouts refused.
#include <chorus/train/pipeline.hpp>
#include <chorus/train/pipeline_partition.hpp>

#include "../tensor_parallel/tp_test_util.hpp"

#include <map>
#include <optional>
#include <string>

namespace chorus::train {
namespace {

using tp_test::expect_close;

constexpr int kSteps = 3;
constexpr double kLearningRate = 0.4;

GptConfig config(std::int64_t layers) {
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
std::pair<at::Tensor, at::Tensor> batch(int step, std::int64_t samples, std::int64_t length = 6) {
  const at::Tensor n = at::arange(length * samples, at::kLong) + 11 * step;
  return {(n * 7 + 3).remainder(10).view({length, samples}),
          (n * 5 + 1 + step).remainder(10).view({length, samples})};
}

void sgd_step(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    p.sub_(p.grad() * kLearningRate);
    p.mutable_grad().zero_();
  }
}

PipelineGroups groups_of(const Mesh& mesh) {
  const int p = mesh.layout().pp, stage = mesh.coordinates().pp;
  std::optional<Group> embedding;
  if (p > 1 && (stage == 0 || stage == p - 1)) embedding = mesh.embedding();
  return {mesh.pp(), mesh.tp(), embedding};
}

/// Trains the pipeline and the one-process model side by side for kSteps steps.
void check_equivalence(const ScheduleOptions& schedule) {
  const int p = schedule.stages, m = schedule.micro_batches;
  const std::int64_t layers = std::max(4, p * schedule.chunks);
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(p) + " m " +
               std::to_string(m) + " v " + std::to_string(schedule.chunks));
  chorus::testing::ThreadJob job(p);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    GptPipeline pipeline(config(layers), groups_of(mesh),
                         {.schedule = schedule, .layers_per_stage = {}, .costs = {}});
    const GptModel reference(config(layers), mesh.tp());  // tp has one rank
    std::map<std::string, at::Tensor> expected;
    for (const GptParameter& q : reference.named_parameters()) expected[q.name] = q.tensor;
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto [tokens, targets] = batch(step, 2 * m);
      const at::Tensor loss = pipeline.forward_backward(split_micro_batches(tokens, targets, m));
      const at::Tensor reference_loss = reference.loss(tokens, targets);
      reference_loss.backward();
      ASSERT_EQ(loss.defined(), pipeline.holds_loss());
      if (loss.defined()) expect_close(loss, reference_loss, "loss");
      for (const GptParameter& q : pipeline.named_parameters())
        expect_close(q.tensor.grad(), expected.at(q.name).grad(), q.name + " gradient");
      sgd_step(pipeline.parameters());
      sgd_step(reference.parameters());
    }
    for (const GptParameter& q : pipeline.named_parameters())
      expect_close(q.tensor.detach(), expected.at(q.name).detach(), q.name);
  });
}

void check_schedule(ScheduleKind kind, int chunks = 1) {
  for (int p = 1; p <= 4; ++p)
    for (int m : {1, p, 3 * p + 1}) {
      if ((m == p && p == 1) || (kind == ScheduleKind::Interleaved && m < p)) continue;
      check_equivalence({kind, p, m, chunks});
    }
}

TEST(GptPipeline, GPipeMatchesTheOneProcessModel) { check_schedule(ScheduleKind::GPipe); }
TEST(GptPipeline, OneFOneBMatchesTheOneProcessModel) { check_schedule(ScheduleKind::OneFOneB); }
TEST(GptPipeline, InterleavedMatchesTheOneProcessModel) {
  check_schedule(ScheduleKind::Interleaved, 2);
}
TEST(GptPipeline, ZeroBubbleH1MatchesTheOneProcessModel) {
  check_schedule(ScheduleKind::ZeroBubbleH1);
}

}  // namespace
}  // namespace chorus::train
