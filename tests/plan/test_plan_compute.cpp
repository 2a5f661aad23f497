// The compute model fitted to a compute profile (compute_model.hpp): lines through exact
// points and the fit's edge cases; a synthetic profile's times (made by known lines at four
// micro-batch sizes) reproduced by the fitted model and by the planner's compute term at a
// size and tp the profile did not measure, with recomputation by rule and measured; the
// optimizer's time, the pipeline's boundary tensors and the head's peak in a prediction.
#include "plan/compute_model.hpp"
#include "plan/planner.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace chorus::plan {
namespace {

void expect_line(const CostLine& line, const CostLine& expected) {
  EXPECT_NEAR(line.fixed, expected.fixed, 1e-9 * expected.fixed);
  EXPECT_NEAR(line.per_unit, expected.per_unit, 1e-9 * expected.per_unit);
}

TEST(PlanCompute, LinesThroughExactPointsAndTheFitsEdges) {
  expect_line(fit_cost_line({1, 2, 4, 8}, {3.5, 4, 5, 7}), {3, 0.5});
  // One point (a single-size profile): through the origin, that size's rate for every size.
  expect_line(fit_cost_line({4}, {2}), {0, 0.5});
  expect_line(fit_cost_line({4, 4}, {2, 2}), {0, 0.5});
  // A line that would cross zero above the origin: through the origin instead.
  const CostLine steep = fit_cost_line({1, 2}, {1, 3});
  EXPECT_EQ(steep.fixed, 0);
  EXPECT_GT(steep.per_unit, 1);
  // Times falling with the work: a constant, the relative errors' mean (1.5 / 1.25).
  const CostLine falling = fit_cost_line({1, 2}, {2, 1});
  EXPECT_EQ(falling.per_unit, 0);
  EXPECT_DOUBLE_EQ(falling.fixed, 1.2);
  EXPECT_THROW(fit_cost_line({}, {}), Error);
  EXPECT_THROW(fit_cost_line({1, 2}, {1}), Error);
  EXPECT_THROW(fit_cost_line({1}, {0}), Error);
}

/// The lines a synthetic profile's times are made by (seconds, seconds per FLOP or element).
struct Truth {
  CostLine forward{0.3e-3, 2e-9}, backward{0.5e-3, 1.5e-9};
  CostLine head{0.2e-3, 3e-9}, embedding{0.05e-3, 4e-9};
};

ModelConfig model() {
  ModelConfig m;
  m.layers = 8, m.hidden = 64, m.heads = 4, m.vocab = 256, m.seq = 64;
  return m;
}

/// chorus-train's profile of model() at micro-batch 8 and, in "at" lines, 1, 2 and 4.
ComputeProfile synthetic_profile(const Truth& t) {
  const ModelConfig m = model();
  ComputeProfile p;
  p.hidden = m.hidden, p.heads = m.heads, p.seq = m.seq, p.vocab = m.vocab, p.micro_batch = 8;
  p.optimizer_ns_per_parameter = 5;
  for (const std::int64_t b : {8, 1, 2, 4}) {
    Layout l;
    l.micro_batch = b;
    const double flops = block_forward_flops(m, l);
    const SizeTimes s{b, 1e3 * t.forward.seconds(flops), 1e3 * t.backward.seconds(2 * flops),
                      1e3 * t.embedding.seconds(embedding_elements(m, l)),
                      1e3 * t.head.seconds(3 * head_forward_flops(m, l))};
    if (b != p.micro_batch) {
      p.more_sizes.push_back(s);
      continue;
    }
    p.layer_forward_ms = s.layer_forward_ms, p.layer_backward_ms = s.layer_backward_ms;
    p.embedding_ms = s.embedding_ms, p.head_ms = s.head_ms;
  }
  return p;
}

/// model() on 2 ranks of free links, its compute by `measured`.
PlanRequest measured_request(const ComputeModel& measured) {
  PlanRequest r;
  r.model = model();
  r.ranks_per_host = 2;
  r.machine.links = {};
  r.machine.measured = measured;
  return r;
}

TEST(PlanCompute, TheFittedModelReproducesASyntheticProfile) {
  const Truth truth;
  const ComputeModel c = fit_compute_model(synthetic_profile(truth), "synthetic");
  expect_line(c.block_forward, truth.forward);
  expect_line(c.block_backward, truth.backward);
  expect_line(c.head, truth.head);
  expect_line(c.embedding, truth.embedding);
  EXPECT_DOUBLE_EQ(c.optimizer_per_parameter, 5e-9);

  // The planner's compute term at micro-batch 3 and tp 2: every block's two lines, the head's
  // and the embedding's, m times.
  const PlanRequest r = measured_request(c);
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.tp = 2, l.micro_batches = 4, l.micro_batch = 3;
  const double flops = block_forward_flops(r.model, l);
  const double one = 8 * (truth.forward.seconds(flops) + truth.backward.seconds(2 * flops)) +
                     truth.head.seconds(3 * head_forward_flops(r.model, l)) +
                     truth.embedding.seconds(embedding_elements(r.model, l));
  const Prediction p = predict(r, l, costs);
  EXPECT_NEAR(p.compute_seconds, 4 * one, 1e-9 * one);
  // The optimizer's step on the rank's parameters (8 blocks, the embedding, the final norm).
  const double parameters =
      8 * block_parameters(r.model, l).dense + embedding_parameters(r.model, l) + 2 * 64;
  EXPECT_NEAR(p.optimizer_seconds, 5e-9 * parameters, 1e-9 * p.optimizer_seconds);
  EXPECT_NEAR(p.step_seconds, p.compute_seconds + p.optimizer_seconds, 1e-12);
  // Recomputation runs a whole forward again, or the attention core (its FLOPs and its share
  // of the fixed time).
  l.recompute = Recompute::Full;
  EXPECT_NEAR(predict(r, l, costs).compute_seconds, 4 * (one + 8 * truth.forward.seconds(flops)),
              1e-9 * one);
  l.recompute = Recompute::Selective;
  const double core = kAttentionCoreFixedShare * truth.forward.fixed +
                      attention_core_flops(r.model, l) * truth.forward.per_unit;
  EXPECT_NEAR(predict(r, l, costs).compute_seconds, 4 * (one + 8 * core), 1e-9 * one);
}

// Measured recomputing backwards: what each adds to a block's backward is its line less the
// plain backward's.
TEST(PlanCompute, MeasuredRecomputationReplacesTheRule) {
  const Truth truth;
  const CostLine selective{0.9e-3, 1.6e-9}, full{1.1e-3, 1.4e-9};
  ComputeProfile profile = synthetic_profile(truth);
  for (const SizeTimes& s : profile.sizes()) {
    Layout l;
    l.micro_batch = s.micro_batch;
    const double flops = block_forward_flops(model(), l);
    profile.recompute.push_back(
        {s.micro_batch, 1e3 * selective.seconds(2 * flops + attention_core_flops(model(), l)),
         1e3 * full.seconds(3 * flops)});
  }
  const ComputeModel c = fit_compute_model(profile, "synthetic");
  expect_line(c.selective_backward, selective);
  expect_line(c.full_backward, full);
  const PlanRequest r = measured_request(c);
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.tp = 2, l.micro_batches = 2, l.micro_batch = 3;
  const double none = predict(r, l, costs).compute_seconds;
  const double flops = block_forward_flops(r.model, l);
  const double backward = truth.backward.seconds(2 * flops);
  l.recompute = Recompute::Selective;
  const double again = selective.seconds(2 * flops + attention_core_flops(r.model, l)) - backward;
  EXPECT_NEAR(predict(r, l, costs).compute_seconds, none + 2 * 8 * again, 1e-9 * none);
  l.recompute = Recompute::Full;
  EXPECT_NEAR(predict(r, l, costs).compute_seconds,
              none + 2 * 8 * (full.seconds(3 * flops) - backward), 1e-9 * none);
}

TEST(PlanCompute, OneSizeWithoutAVocabularyIsTheOldModel) {
  ComputeProfile p = synthetic_profile(Truth{});
  p.more_sizes.clear();
  p.vocab = 0;
  const ComputeModel c = fit_compute_model(p, "old");
  Layout at;
  at.micro_batch = 8;
  EXPECT_EQ(c.block_forward.fixed, 0);
  EXPECT_DOUBLE_EQ(c.block_forward.per_unit * block_forward_flops(model(), at),
                   p.layer_forward_ms * 1e-3);
  EXPECT_FALSE(c.head.measured());  // the head runs at the blocks' rates
  EXPECT_TRUE(c.embedding.measured());
}

// A profile of a tiny model whose larger micro-batches timed no slower (noise larger than
// the work): the block lines are constants without a marginal rate, and the planner still
// times every layout by them instead of refusing for want of a compute rate.
TEST(PlanCompute, ConstantBlockLinesStillPlan) {
  ComputeProfile p = synthetic_profile(Truth{});
  for (SizeTimes& s : p.more_sizes) {
    s.layer_forward_ms = 2 * p.layer_forward_ms;
    s.layer_backward_ms = 2 * p.layer_backward_ms;
  }
  const ComputeModel c = fit_compute_model(p, "noisy");
  EXPECT_EQ(c.block_forward.per_unit, 0);
  EXPECT_GT(c.block_forward.fixed, 0);
  PlanRequest r = measured_request(c);
  r.global_batch = 16;
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.feasible.empty()) << result.infeasible;
  EXPECT_GT(result.feasible.front().compute_seconds, 0);
}

TEST(PlanCompute, ThePipelinesBoundaryTensorsAreInTheMemory) {
  PlanRequest r;
  r.model = model();
  r.ranks_per_host = 2;
  r.machine.peak_flops = 1e9;
  r.machine.links = {};
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.pp = 2, l.micro_batches = 4, l.micro_batch = 2;
  const double boundary = 2 * 64 * 64 * 4.0;
  const MemoryUse one_f_one_b = predict(r, l, costs).memory;
  EXPECT_DOUBLE_EQ(one_f_one_b.boundaries, (2 + 2) * boundary);  // min(m, p) in flight
  EXPECT_DOUBLE_EQ(one_f_one_b.total(),
                   one_f_one_b.states() + one_f_one_b.activations + one_f_one_b.boundaries);
  l.schedule = Schedule::Interleaved, l.virtual_stages = 2;  // min(m·v, (v+1)·p - 1) chunks
  EXPECT_DOUBLE_EQ(predict(r, l, costs).memory.boundaries, (5 + 2) * boundary);
  l.tp = 2, l.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).memory.boundaries, (5 + 2) * boundary / 2);
  l = Layout{};
  const MemoryUse one_stage = predict(r, l, costs).memory;
  EXPECT_EQ(one_stage.boundaries, 0);
  // The blocks' activations and the cross-entropy's 7 logits-sized tensors of b·s·V floats.
  EXPECT_DOUBLE_EQ(one_stage.activations,
                   8 * kept_activation_bytes(r.model, l, Precision::fp32()) + 7 * 64 * 256 * 4.0);
}

}  // namespace
}  // namespace chorus::plan
