// Dispatch then combine with identity experts is the identity, gradients included (PARALLEL.md
// section 4.5), at ep 1-4: random uneven routing, every token sent to one rank's experts (the
// other ranks' experts receive none), a rank without tokens; top-1 with gate 1 and top-2 with
// gates 1/2 (exact in binary). The ledger holds exactly one count exchange and two
// all_to_all_v forward, two all_to_all_v backward.
#include <chorus/train/moe.hpp>
#include <chorus/train/random.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

constexpr std::int64_t kHidden = 5;

/// A routing with `choices[t]` the experts of token t (one or two), every gate `gate`, sorted
/// by expert then token as route_tokens leaves it.
MoeRouting routing_of(const std::vector<std::vector<std::int64_t>>& choices, std::int64_t experts,
                      double gate) {
  MoeRouting r;
  r.kept.assign(experts, 0);
  std::vector<std::int64_t> token, expert;
  for (std::int64_t e = 0; e < experts; ++e)
    for (std::size_t t = 0; t < choices.size(); ++t)
      if (std::ranges::count(choices[t], e) > 0) {
        token.push_back(static_cast<std::int64_t>(t));
        expert.push_back(e);
        ++r.kept[e];
      }
  r.routed = r.kept;
  r.token = torch::tensor(token, at::kLong);
  r.expert = torch::tensor(expert, at::kLong);
  r.gate = torch::full({static_cast<std::int64_t>(token.size())}, gate, at::kDouble);
  return r;
}

/// Token t of rank `rank` goes to `pick(rank, t, slot)` for each of its k slots.
using Pick = std::function<std::int64_t(int rank, std::int64_t t, int slot)>;

void round_trip(int ranks, int k, std::int64_t experts, const Pick& pick,
                const std::function<std::int64_t(int)>& tokens_of) {
  torch::set_num_threads(1);
  chorus::testing::ThreadJob job(ranks);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& comm) {
    const int rank = comm.rank();
    SCOPED_TRACE("ep " + std::to_string(ranks) + ", k " + std::to_string(k) + ", rank " +
                 std::to_string(rank));
    Group ep{comm, "ep", std::make_shared<CollectiveLedger>()};
    ep.ledger->enable();
    const std::int64_t n = tokens_of(rank);
    std::vector<std::vector<std::int64_t>> choices(n);
    for (std::int64_t t = 0; t < n; ++t)
      for (int s = 0; s < k; ++s) choices[t].push_back(pick(rank, t, s));
    const MoeRouting routing = routing_of(choices, experts, k == 1 ? 1.0 : 0.5);
    const at::Tensor x =
        init_slice({.seed = 7, .name = "x" + std::to_string(rank), .dtype = at::kDouble},
                   {n, kHidden})
            .requires_grad_();
    const DispatchPlan plan = plan_dispatch(routing, experts, ep);
    const at::Tensor rows = moe_dispatch(x, routing, plan, ep);
    std::int64_t received = 0;
    for (std::int64_t r : plan.expert_rows) received += r;
    ASSERT_EQ(rows.size(0), received);
    const at::Tensor out = moe_combine(rows, routing, plan, ep, n);
    EXPECT_TRUE(at::equal(out, x)) << out << x;
    const std::size_t sent_bytes = routing.token.numel() * kHidden * 8;
    const std::size_t recv_bytes = received * kHidden * 8;
    std::vector<LedgerEntry> forward{
        {"ep", CollectiveKind::AllToAll, static_cast<std::size_t>(experts) * 8},
        {"ep", CollectiveKind::AllToAllV, sent_bytes},
        {"ep", CollectiveKind::AllToAllV, recv_bytes}};
    std::vector<LedgerEntry> backward{{"ep", CollectiveKind::AllToAllV, sent_bytes},
                                      {"ep", CollectiveKind::AllToAllV, recv_bytes}};
    if (ranks == 1) forward.clear(), backward.clear();
    EXPECT_EQ(ep.ledger->take(), forward) << describe(forward);
    const at::Tensor weight = init_slice(
        {.seed = 8, .name = "c" + std::to_string(rank), .dtype = at::kDouble}, {n, kHidden});
    (out * weight).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), weight)) << x.grad() << weight;
    EXPECT_EQ(ep.ledger->take(), backward) << describe(backward);
  });
}

std::int64_t uneven(int rank, std::int64_t t, int slot, std::int64_t experts) {
  const std::uint64_t h = splitmix64(static_cast<std::uint64_t>(rank * 1000 + t));
  const std::int64_t first = static_cast<std::int64_t>(h % experts);
  return slot == 0 ? first
                   : (first + 1 + static_cast<std::int64_t>((h >> 20) % (experts - 1))) % experts;
}

TEST(MoeDispatch, RoundTripIsTheIdentityWithRandomUnevenRouting) {
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (int k = 1; k <= 2; ++k) {
      const std::int64_t experts = 2 * ranks;
      round_trip(
          ranks, k, experts, [&](int r, std::int64_t t, int s) { return uneven(r, t, s, experts); },
          [](int r) { return 5 + 3 * r; });
    }
}

TEST(MoeDispatch, RoundTripWithEveryTokenSentToTheLastRank) {
  for (int ranks = 2; ranks <= 4; ++ranks)
    for (int k = 1; k <= 2; ++k) {
      const std::int64_t experts = 2 * ranks;
      round_trip(
          ranks, k, experts, [&](int, std::int64_t, int s) { return experts - 2 + s; },
          [](int r) { return 4 + r; });
    }
}

TEST(MoeDispatch, RoundTripWithARankWithoutTokens) {
  for (int ranks = 2; ranks <= 4; ++ranks)
    round_trip(
        ranks, 2, ranks, [&](int r, std::int64_t t, int s) { return uneven(r, t, s, ranks); },
        [ranks](int r) { return r == ranks - 1 ? 0 : 6; });
}

TEST(MoeDispatch, ExpertsNotAMultipleOfTheGroupFailWithASentence) {
  chorus::testing::ThreadJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& comm) {
    const Group ep{comm, "ep", nullptr};
    try {
      plan_dispatch(routing_of({{0}}, 3, 1.0), 3, ep);
      ADD_FAILURE() << "accepted 3 experts over 2 ranks";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "MoE: 3 experts are not a multiple of the ep group's 2 ranks");
    }
  });
}

}  // namespace
}  // namespace chorus::train
