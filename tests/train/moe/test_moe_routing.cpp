// MoE routing by hand: the capacity formula, which assignments an expert drops (lowest
// probability first, ties by token index), the gates (raw at k = 1, renormalised at k = 2 and
// kept when the other expert drops the token), the load-balancing loss, and the sentences of
// bad options and layouts.
#include <chorus/train/moe.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace chorus::train {
namespace {

std::vector<std::int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

void expect_gates(const at::Tensor& gate, const std::vector<double>& expected) {
  ASSERT_EQ(gate.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(gate[i].item<double>(), expected[i], 1e-15) << "gate " << i;
}

TEST(MoeRouting, CapacityIsTheCeilingOfTokensTimesKTimesFactorOverExperts) {
  EXPECT_EQ(expert_capacity(4, 1, 1.0, 2), 2);
  EXPECT_EQ(expert_capacity(4, 2, 1.0, 3), 3);    // 8/3 rounds up
  EXPECT_EQ(expert_capacity(10, 1, 1.25, 4), 4);  // 3.125
  EXPECT_EQ(expert_capacity(8, 2, 1.5, 12), 2);
}

// Two groups of 4 tokens, 2 experts, capacity 2. Group 0: expert 0 wants t0 (.7), t1 (.6) and
// t2 (.9): t1 is the lowest and dropped. Group 1: it wants t4, t5, t6 at .6 each: the tie drops
// the highest index, t6.
TEST(MoeRouting, TopOneDropsTheLowestProbabilityThenTheHighestTokenIndex) {
  const at::Tensor probs =
      torch::tensor(
          {{.7, .3}, {.6, .4}, {.9, .1}, {.2, .8}, {.6, .4}, {.6, .4}, {.6, .4}, {.3, .7}},
          at::kDouble)
          .requires_grad_();
  const MoeRouting r = route_tokens(probs, {.top_k = 1, .capacity_factor = 1.0, .group_tokens = 4});
  EXPECT_EQ(values(r.token), (std::vector<std::int64_t>{0, 2, 4, 5, 3, 7}));
  EXPECT_EQ(values(r.expert), (std::vector<std::int64_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(r.routed, (std::vector<std::int64_t>{6, 2}));
  EXPECT_EQ(r.kept, (std::vector<std::int64_t>{4, 2}));
  expect_gates(r.gate, {.7, .9, .6, .6, .8, .7});  // k = 1: the raw probability
  // Group 0: f = (3/4, 1/4), P = (.6, .4); group 1: f = (3/4, 1/4), P = (.525, .475).
  const double aux = 0.01 * 2 * ((.75 * .6 + .25 * .4) + (.75 * .525 + .25 * .475)) / 2;
  EXPECT_NEAR(load_balancing_loss(probs, r, 4, 0.01).item<double>(), aux, 1e-16);
  // The gradient reaches the kept gates only: d(sum of gates)/dp is 1 at the kept top-1.
  r.gate.sum().backward();
  const at::Tensor expected = torch::tensor(
      {{1., 0.}, {0., 0.}, {1., 0.}, {0., 1.}, {1., 0.}, {1., 0.}, {0., 0.}, {0., 1.}},
      at::kDouble);
  EXPECT_TRUE(at::equal(probs.grad(), expected)) << probs.grad();

  const MoeRouting all = route_tokens(probs, {.top_k = 1, .dropless = true, .group_tokens = 4});
  EXPECT_EQ(all.kept, (std::vector<std::int64_t>{6, 2}));
  EXPECT_EQ(values(all.token), (std::vector<std::int64_t>{0, 1, 2, 4, 5, 6, 3, 7}));
}

// 4 tokens, 3 experts, k = 2, capacity ceil(4·2/3) = 3. Expert 0 is every token's first
// choice (.5, .4, .6, .55): t1's is dropped; t1 keeps expert 1 with its renormalised gate
// .35/.75, not renormalised again.
TEST(MoeRouting, TopTwoKeepsTheOtherExpertOfAHalfDroppedToken) {
  const at::Tensor probs =
      torch::tensor({{.5, .3, .2}, {.4, .35, .25}, {.6, .1, .3}, {.55, .15, .3}}, at::kDouble);
  const MoeRouting r = route_tokens(probs, {.top_k = 2, .capacity_factor = 1.0});
  EXPECT_EQ(values(r.topk_expert), (std::vector<std::int64_t>{0, 1, 0, 1, 0, 2, 0, 2}));
  EXPECT_EQ(values(r.token), (std::vector<std::int64_t>{0, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(values(r.expert), (std::vector<std::int64_t>{0, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(r.routed, (std::vector<std::int64_t>{4, 2, 2}));
  EXPECT_EQ(r.kept, (std::vector<std::int64_t>{3, 2, 2}));
  expect_gates(r.gate, {.5 / .8, .6 / .9, .55 / .85, .3 / .8, .35 / .75, .3 / .9, .3 / .85});
  // f = (4, 2, 2)/8, P = (2.05, .9, 1.05)/4.
  const double aux = 0.05 * 3 * (.5 * 2.05 / 4 + .25 * .9 / 4 + .25 * 1.05 / 4);
  EXPECT_NEAR(load_balancing_loss(probs, r, 0, 0.05).item<double>(), aux, 1e-16);
}

template <typename F>
void expect_invalid(F&& f, const std::string& sentence) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected: " << sentence;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_EQ(std::string(e.what()), sentence);
  }
}

TEST(MoeRouting, BadOptionsFailWithASentence) {
  const at::Tensor probs = at::full({6, 3}, 1.0 / 3, at::kDouble);
  expect_invalid([&] { route_tokens(probs, {.top_k = 3}); }, "MoE: top_k 3 is not 1 or 2");
  expect_invalid([&] { route_tokens(probs.narrow(1, 0, 1), {.top_k = 2}); },
                 "MoE: top_k 2 exceeds the number of experts 1");
  expect_invalid([&] { route_tokens(probs, {.capacity_factor = 0}); },
                 "MoE: capacity factor 0 is not positive (use dropless for no capacity)");
  expect_invalid([&] { route_tokens(probs, {.group_tokens = 4}); },
                 "MoE: 6 tokens are not a multiple of group_tokens 4");
}

TEST(MoeLayerConstruction, BadLayoutsAndOptionsFailOnEveryRank) {
  chorus::testing::ThreadJob job(4);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    Mesh mesh(world, {.degrees = {.ep = 4}});
    const MoeOptions base{.hidden = 8, .ffn = 16, .experts = 8, .dtype = at::kDouble};
    MoeOptions o = base;
    o.experts = 6;
    expect_invalid([&] { MoeLayer(o, mesh); },
                   "MoeLayer: 6 experts are not a multiple of the ep group's 4 ranks");
    o = base;
    o.routing.top_k = 3;
    expect_invalid([&] { MoeLayer(o, mesh); }, "MoE: top_k 3 is not 1 or 2");
    o = base;
    o.routing.capacity_factor = -1;
    expect_invalid([&] { MoeLayer(o, mesh); },
                   "MoE: capacity factor -1 is not positive (use dropless for no capacity)");
    o = base;
    o.ffn = 0;
    expect_invalid([&] { MoeLayer(o, mesh); }, "MoeLayer: ffn 0 is not positive");
    expect_invalid([&] { Mesh(world, {.degrees = {.dp = 2, .tp = 2, .ep = 4}}); },
                   "mesh: ep 4 does not divide dp·cp = 2 (dp 2, cp 1)");
  });
}

}  // namespace
}  // namespace chorus::train
