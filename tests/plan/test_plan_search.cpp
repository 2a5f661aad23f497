// The planner's search: feasibility rules, step-time terms on free links, rankings whose
// answer is known, ZeRO memory, and the sentences of infeasible requests.
#include "plan/planner.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace chorus::plan {
namespace {

/// A machine whose links cost nothing: predictions are compute and bubble only.
Machine free_links() {
  Machine machine;
  machine.peak_flops = 1e9;
  machine.links = {};
  return machine;
}

PlanRequest tiny_request(int ranks_per_host, int hosts) {
  PlanRequest r;
  r.model.layers = 4, r.model.hidden = 8, r.model.heads = 4, r.model.vocab = 16;
  r.model.seq = 8;
  r.global_batch = 8;
  r.ranks_per_host = ranks_per_host, r.hosts = hosts;
  r.machine = free_links();
  return r;
}

bool has(const std::vector<Layout>& layouts, auto predicate) {
  return std::any_of(layouts.begin(), layouts.end(), predicate);
}

TEST(PlanSearch, FeasibilityRules) {
  PlanRequest r = tiny_request(8, 1);
  const std::vector<Layout> all = candidate_layouts(r, nullptr);
  ASSERT_FALSE(all.empty());
  for (const Layout& l : all) {
    EXPECT_EQ(l.tp * l.pp * l.cp * l.dp, 8) << l.describe();
    EXPECT_EQ(r.model.heads % (l.tp * l.cp), 0) << l.describe();
    EXPECT_LE(l.pp, r.model.layers) << l.describe();
    EXPECT_EQ(l.micro_batch * l.micro_batches * l.dp, r.global_batch) << l.describe();
    EXPECT_FALSE(l.zero >= 2 && l.pp > 1) << l.describe();
    EXPECT_FALSE(l.sequence_parallel && l.tp == 1) << l.describe();
    if (l.schedule == Schedule::Interleaved) {
      EXPECT_GE(l.micro_batches, l.pp) << l.describe();
      EXPECT_LE(l.pp * l.virtual_stages, r.model.layers) << l.describe();
    }
  }
  EXPECT_FALSE(has(all, [](const Layout& l) { return l.tp == 8; }));  // 4 heads
  EXPECT_TRUE(has(all, [](const Layout& l) { return l.tp == 2 && l.cp == 2 && l.dp == 2; }));
  EXPECT_TRUE(has(all, [](const Layout& l) { return l.zero == 3 && l.pp == 1; }));
  r.model.experts = 4;
  const std::vector<Layout> moe = candidate_layouts(r, nullptr);
  for (const Layout& l : moe) {
    EXPECT_EQ(l.dp * l.cp % l.ep, 0) << l.describe();
    EXPECT_EQ(r.model.experts % l.ep, 0) << l.describe();
  }
  EXPECT_TRUE(has(moe, [](const Layout& l) { return l.ep == 4 && l.dp == 4; }));
}

TEST(PlanSearch, StepTermsOnFreeLinks) {
  PlanRequest r = tiny_request(2, 1);
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.pp = 2, l.micro_batches = 4, l.micro_batch = 2;
  const Prediction p = predict(r, l, costs);
  // Heaviest stage: 2 blocks plus the head, backward twice the forward.
  const double forward =
      (2 * block_forward_flops(r.model, l) + head_forward_flops(r.model, l)) / r.machine.peak_flops;
  EXPECT_DOUBLE_EQ(p.compute_seconds, 4 * 3 * forward);
  EXPECT_DOUBLE_EQ(p.bubble_seconds, 1 * 3 * forward);  // (p - 1) micro-batch times
  EXPECT_DOUBLE_EQ(p.step_seconds, (4 + 2 - 1) * 3 * forward);
  l.schedule = Schedule::Interleaved, l.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).bubble_seconds, 3 * forward / 2);
  l.schedule = Schedule::OneFOneB, l.virtual_stages = 1, l.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).compute_seconds,
                   4 * (3 * forward + 2 * block_forward_flops(r.model, l) / r.machine.peak_flops));
}

/// The element-wise kernels' bytes at the memory bandwidth, added to the matrix products'
/// time, the forward's again under full recomputation; not with measured rates.
TEST(PlanSearch, ElementWiseTrafficAtTheMemoryBandwidth) {
  PlanRequest r = tiny_request(2, 1);
  r.machine.memory_bandwidth = 1e6;
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.pp = 2, l.micro_batches = 4, l.micro_batch = 2;
  const double flops =
      3 * (2 * block_forward_flops(r.model, l) + head_forward_flops(r.model, l)) / 1e9;
  const MemoryTraffic t = block_memory_traffic(r.model, l, r.machine.precision);
  EXPECT_GT(t.forward, 0);
  EXPECT_DOUBLE_EQ(predict(r, l, costs).compute_seconds,
                   4 * (flops + 2 * (t.forward + t.backward) / 1e6));
  l.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).compute_seconds,
                   4 * (flops + 2 * block_forward_flops(r.model, l) / 1e9 +
                        2 * (2 * t.forward + t.backward) / 1e6));
  l.recompute = Recompute::Selective;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).compute_seconds,
                   4 * (flops + 2 * attention_core_flops(r.model, l) / 1e9 +
                        2 * (t.forward + t.attention_forward + t.backward) / 1e6));
  ComputeModel measured;  // a compute profile's rates, no fixed time, no head line
  measured.block_forward.per_unit = measured.block_backward.per_unit = 1e-9;
  r.machine.measured = measured;
  l.recompute = Recompute::None;
  EXPECT_DOUBLE_EQ(predict(r, l, costs).compute_seconds, 4 * flops);
}

TEST(PlanSearch, ZeroMemoryFollowsTheFormulas) {
  PlanRequest r = tiny_request(4, 1);
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.dp = 4, l.micro_batch = 2;
  const double psi = r.model.parameters();  // pp 1, tp 1: the whole model on every rank
  const double block = block_parameters(r.model, l).dense;
  const double expected[4][3] = {
      {4 * psi, 4 * psi, 8 * psi},
      {4 * psi, 4 * psi, 8 * psi / 4},
      {4 * psi, 4 * psi / 4, 8 * psi / 4},
      {4 * psi / 4 + 2 * 4 * block, 4 * psi / 4 + 4 * block, 8 * psi / 4}};
  for (int zero = 0; zero <= 3; ++zero) {
    l.zero = zero;
    const MemoryUse m = predict(r, l, costs).memory;
    EXPECT_DOUBLE_EQ(m.parameters, expected[zero][0]) << zero;
    EXPECT_DOUBLE_EQ(m.gradients, expected[zero][1]) << zero;
    EXPECT_DOUBLE_EQ(m.optimizer, expected[zero][2]) << zero;
  }
}

/// Two hosts of one rank and a model with one head: the layouts are dp 2 or pp 2.
PlanRequest two_hosts(double inter_host_beta) {
  PlanRequest r = tiny_request(1, 2);
  r.model.heads = 1, r.model.hidden = 512, r.model.seq = 8;
  r.machine.links.tcp = {1e-6, inter_host_beta};
  return r;
}

TEST(PlanSearch, RankingWithKnownAnswers) {
  // Free links: dp 2 has no bubble, so it wins.
  const PlanResult fast = plan(two_hosts(0));
  ASSERT_FALSE(fast.feasible.empty());
  EXPECT_EQ(fast.feasible[0].layout.dp, 2);
  // A link of 1 us per byte: dp's all-reduce of 12.6 M parameters (50 MB, ~100 s) dwarfs
  // pp's messages of 8 x 512 activations per micro-batch and its bubble.
  const PlanResult slow = plan(two_hosts(1e-6));
  ASSERT_FALSE(slow.feasible.empty());
  EXPECT_EQ(slow.feasible[0].layout.pp, 2);
  for (std::size_t i = 1; i < slow.feasible.size(); ++i)
    EXPECT_LE(slow.feasible[i - 1].step_seconds, slow.feasible[i].step_seconds);
  const std::string why = explain(slow.feasible[0], slow.feasible.back());
  EXPECT_NE(why.find("dp exposed"), std::string::npos) << why;
}

TEST(PlanSearch, TpStaysInsideAHostAndCostsLessThere) {
  // 2 hosts of 2: tp 2 shares a host, dp 2 crosses; with a slow inter-host link the best
  // layout keeps the chatty tp inside the host rather than dp 4 over the slow link.
  PlanRequest r = tiny_request(2, 2);
  r.model.hidden = 256, r.model.heads = 2;
  r.machine.links.tcp = {1e-4, 1e-7};
  r.machine.links.shm = {1e-7, 1e-12};
  r.machine.links.arena = {1e-7, 1e-12};
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.feasible.empty());
  EXPECT_EQ(result.feasible[0].layout.tp, 2) << result.feasible[0].layout.describe();
  EXPECT_EQ(group_shape(1, 2, 2).hosts, 1);
  EXPECT_EQ(group_shape(2, 2, 2).hosts, 2);
  EXPECT_EQ(group_shape(2, 4, 8).hosts, 1);
  EXPECT_EQ(group_shape(4, 4, 8).hosts, 2);
  EXPECT_EQ(group_shape(8, 4, 8).hosts, 4);
}

TEST(PlanSearch, InfeasibleRequestsSayWhatBinds) {
  PlanRequest r = tiny_request(7, 1);
  PlanResult result = plan(r);
  EXPECT_TRUE(result.feasible.empty());
  EXPECT_NE(result.infeasible.find("no layout splits the world of 7 ranks"), std::string::npos);
  EXPECT_NE(result.infeasible.find("dp must divide the global batch 8 (dp 7)"), std::string::npos)
      << result.infeasible;
  EXPECT_NE(result.infeasible.find("tp must divide the 4 heads (tp 7)"), std::string::npos);

  r = tiny_request(4, 1);
  r.memory_budget = 1000;  // bytes
  result = plan(r);
  EXPECT_TRUE(result.feasible.empty());
  EXPECT_EQ(result.infeasible.rfind("memory binds: the smallest layout (", 0), 0)
      << result.infeasible;
  EXPECT_NE(result.infeasible.find("short"), std::string::npos);
  EXPECT_NE(result.infeasible.find("the budget is 9.31e-07 GiB"), std::string::npos)
      << result.infeasible;

  r.model.hidden = 7;  // not a multiple of 4 heads
  EXPECT_THROW(plan(r), Error);
  r = tiny_request(4, 1);
  r.machine.peak_flops = 0;
  EXPECT_THROW(plan(r), Error);
}

}  // namespace
}  // namespace chorus::plan

namespace chorus::plan {
namespace {

/// PARALLEL.md section 2's counts per micro-batch, costed call by call.
TEST(PlanSearch, CollectiveCountsPerGroup) {
  PlanRequest r = tiny_request(8, 1);
  r.machine.links.shm = {1e-6, 1e-9};
  r.machine.links.arena = {1e-6, 1e-9};
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.tp = 2, l.cp = 2, l.dp = 2, l.micro_batch = 4, l.micro_batches = 1;
  const double L = 4, act = 4.0 * 8 / 2 * 8 * 4, tokens = 4.0 * 8 / 2 * 4;
  const GroupShape tp{2, 1}, cp{2, 1};
  const double cross_entropy = 3 * costs.all_reduce(tokens, tp);
  Prediction p = predict(r, l, costs);
  EXPECT_DOUBLE_EQ(p.group_exposed("tp"), (4 * L + 2) * costs.all_reduce(act, tp) + cross_entropy);
  EXPECT_DOUBLE_EQ(p.group_exposed("cp"),
                   2 * L * (costs.all_to_all(3 * act / 2, cp) + costs.all_to_all(act / 2, cp)));
  l.sequence_parallel = true;
  p = predict(r, l, costs);
  EXPECT_DOUBLE_EQ(p.group_exposed("tp"), (6 * L + 2) * costs.all_gather(act, tp) +
                                              (4 * L + 2) * costs.reduce_scatter(act, tp) +
                                              cross_entropy);
  l.recompute = Recompute::Full;  // the blocks' forward collectives again
  p = predict(r, l, costs);
  EXPECT_DOUBLE_EQ(p.group_exposed("tp"), (8 * L + 2) * costs.all_gather(act, tp) +
                                              (6 * L + 2) * costs.reduce_scatter(act, tp) +
                                              cross_entropy);
  EXPECT_DOUBLE_EQ(p.group_exposed("cp"),
                   3 * L * (costs.all_to_all(3 * act / 2, cp) + costs.all_to_all(act / 2, cp)));
  Layout pipe;
  pipe.pp = 2, pipe.dp = 4, pipe.micro_batch = 1, pipe.micro_batches = 2;
  pipe.schedule = Schedule::Interleaved, pipe.virtual_stages = 2;
  const double boundary = 1.0 * 8 * 8 * 4;
  EXPECT_DOUBLE_EQ(predict(r, pipe, costs).group_exposed("pp"),
                   2 * 2 * 2 * costs.send(boundary, false));
  EXPECT_GT(predict(r, pipe, costs).group_exposed("embedding"), 0);
}

/// Megatron's scatter/gather: a tp 4 stage's boundary crosses hosts as four 1/4 shards, one
/// per tp rank in parallel, and is all-gathered over tp (NVLink) on arrival.
TEST(PlanSearch, PipelineScatterGather) {
  PlanRequest r = tiny_request(4, 2);
  r.machine.links.tcp = {0, 1e-9};  // 1 GB/s between hosts, free inside a host
  CollectiveCosts costs(r.machine.links);
  Layout l;
  l.tp = 4, l.pp = 2, l.micro_batch = 2, l.micro_batches = 8;
  const double boundary = 2.0 * 8 * 8 * 4;  // b s h fp32: 512 bytes
  // 2 messages (activation, gradient) per micro-batch, 8 micro-batches, 1 ns a byte.
  EXPECT_DOUBLE_EQ(predict(r, l, costs).group_exposed("pp"), 8 * 2 * 512e-9);
  r.pipeline_scatter_gather = true;
  EXPECT_DOUBLE_EQ(boundary, 512);
  EXPECT_DOUBLE_EQ(predict(r, l, costs).group_exposed("pp"), 8 * 2 * 128e-9);
  r.machine.links.shm = {1e-6, 0}, r.machine.links.arena = {1e-6, 0};  // the gather costs too
  CollectiveCosts nvlink(r.machine.links);
  EXPECT_DOUBLE_EQ(predict(r, l, nvlink).group_exposed("pp"),
                   8 * 2 * (128e-9 + nvlink.all_gather(boundary, {4, 1})));
  EXPECT_GT(nvlink.all_gather(boundary, {4, 1}), 0);
  l.sequence_parallel = true;  // the boundary is already a 1/tp shard: sent as it is
  EXPECT_DOUBLE_EQ(predict(r, l, nvlink).group_exposed("pp"), 8 * 2 * 128e-9);
}

}  // namespace
}  // namespace chorus::plan
