// The pipeline schedules and their verifier (pure C++): every generated schedule is accepted
// and its bubble equals the textbook formula; hand-broken schedules are refused naming each
// stuck rank's first stuck action; the text timeline.
#include <chorus/error.hpp>
#include <chorus/train/pipeline_schedule.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

using Op = PipelineOp;
constexpr ScheduleKind kKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                   ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1};

/// The options the tests sweep: p in 1..4, m in {1, p, 3p + 1} where the schedule allows it,
/// v in {2, 3} for interleaved.
std::vector<ScheduleOptions> sweep(ScheduleKind kind) {
  std::vector<ScheduleOptions> out;
  for (int p = 1; p <= 4; ++p)
    for (int m : {1, p, 3 * p + 1}) {
      if (kind != ScheduleKind::Interleaved) {
        out.push_back({kind, p, m, 1});
        continue;
      }
      if (m < p) continue;
      for (int v : {2, 3}) out.push_back({kind, p, m, v});
    }
  return out;
}

std::string name(const ScheduleOptions& o) {
  return std::string(to_string(o.kind)) + " p " + std::to_string(o.stages) + " m " +
         std::to_string(o.micro_batches) + " v " + std::to_string(o.chunks);
}

std::string refusal(const PipelineSchedule& s) {
  try {
    verify_schedule(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PipelineSchedule, VerifierAcceptsEveryScheduleWithTheTextbookBubble) {
  // Full backward = input + weight gradient: B = 2F, and all three equal.
  const ActionCosts costs[] = {{1, 1, 1}, {1, 2, 1}, {2, 1, 3}, {3, 2, 2}};
  for (ScheduleKind kind : kKinds)
    for (const ScheduleOptions& o : sweep(kind))
      for (const ActionCosts& c : costs) {
        SCOPED_TRACE(name(o) + ", costs " + std::to_string(c.forward) + " " +
                     std::to_string(c.backward_input) + " " + std::to_string(c.backward_weight));
        const PipelineSchedule s = make_schedule(o);
        ASSERT_EQ(s.ranks.size(), static_cast<std::size_t>(o.stages));
        const ScheduleReport report = verify_schedule(s, c);
        // ZB-H1's formula assumes the W's fit the bubbles: m >= p and W <= min(F, B).
        if (kind == ScheduleKind::ZeroBubbleH1 &&
            (o.micro_batches < o.stages || c.backward_weight > c.backward_input ||
             c.backward_weight > c.forward))
          continue;
        EXPECT_NEAR(report.bubble, textbook_bubble(o, c), 1e-12);
        for (double busy : report.busy)  // every rank idles the same
          EXPECT_NEAR(report.makespan - busy, report.makespan - report.busy.front(), 1e-12);
      }
}

TEST(PipelineSchedule, InterleavingAndZeroBubbleIdleLessThan1F1B) {
  for (int p : {2, 4})
    for (int m : {p, 2 * p, 4 * p, 8 * p}) {
      const double one_f_one_b =
          verify_schedule(make_schedule({ScheduleKind::OneFOneB, p, m, 1})).bubble;
      EXPECT_LT(verify_schedule(make_schedule({ScheduleKind::Interleaved, p, m, 2})).bubble,
                one_f_one_b);
      EXPECT_LT(verify_schedule(make_schedule({ScheduleKind::ZeroBubbleH1, p, m, 1})).bubble,
                one_f_one_b);
      EXPECT_NEAR(verify_schedule(make_schedule({ScheduleKind::GPipe, p, m, 1})).bubble,
                  one_f_one_b, 1e-12);
    }
}

/// The most micro-batches rank 0 holds state for at once (forward done, weights not yet).
int peak_in_flight(const PipelineSchedule& s) {
  int now = 0, peak = 0;
  for (const PipelineAction& a : s.ranks.front()) {
    if (a.op == Op::Forward) peak = std::max(peak, ++now);
    if (a.op == Op::Backward || a.op == Op::BackwardWeight) --now;
  }
  return peak;
}

TEST(PipelineSchedule, OneFOneBAndZeroBubbleHoldAtMostPMicroBatches) {
  for (int p = 1; p <= 4; ++p)
    for (int m : {1, p, 3 * p + 1}) {
      SCOPED_TRACE("p " + std::to_string(p) + " m " + std::to_string(m));
      EXPECT_EQ(peak_in_flight(make_schedule({ScheduleKind::GPipe, p, m, 1})), m);
      EXPECT_EQ(peak_in_flight(make_schedule({ScheduleKind::OneFOneB, p, m, 1})), std::min(p, m));
      EXPECT_EQ(peak_in_flight(make_schedule({ScheduleKind::ZeroBubbleH1, p, m, 1})),
                std::min(p, m));
    }
}

TEST(PipelineSchedule, ConstructionRefusesBadCountsNamingThem) {
  const auto message = [](const ScheduleOptions& o) -> std::string {
    try {
      make_schedule(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "built";
  };
  EXPECT_EQ(message({ScheduleKind::Interleaved, 4, 3, 2}),
            "pipeline schedule interleaved: 3 micro-batches for 4 stages; interleaving needs at "
            "least as many micro-batches as stages");
  EXPECT_EQ(message({ScheduleKind::Interleaved, 2, 3, 1}),
            "pipeline schedule interleaved: 1 chunk per rank; interleaving needs at least 2");
  EXPECT_EQ(message({ScheduleKind::OneFOneB, 2, 3, 2}),
            "pipeline schedule 1f1b: 2 chunks per rank; only interleaved takes more than 1");
  EXPECT_EQ(message({ScheduleKind::GPipe, 0, 3, 1}),
            "pipeline schedule gpipe: stages 0, micro-batches 3, chunks 1 must all be positive");
  EXPECT_EQ(schedule_kind("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_THROW(schedule_kind("1F1B"), Error);
}

TEST(PipelineSchedule, SendsAndReceivesPairUp) {
  const PipelineSchedule s = make_schedule({ScheduleKind::OneFOneB, 2, 2, 1});
  const std::vector<PipelineAction> rank1{
      {Op::RecvActivation, 0, 0, 0}, {Op::Forward, 0, 0},           {Op::Backward, 0, 0},
      {Op::SendGradient, 0, 0, 0},   {Op::RecvActivation, 1, 0, 0}, {Op::Forward, 1, 0},
      {Op::Backward, 1, 0},          {Op::SendGradient, 1, 0, 0}};
  EXPECT_EQ(s.ranks[1], rank1);
  // One rank interleaving three chunks hands tensors over locally: no communication at all.
  const PipelineSchedule one_rank = make_schedule({ScheduleKind::Interleaved, 1, 2, 3});
  EXPECT_EQ(one_rank.ranks[0].size(), 2u * 3u * 2u);
  for (const PipelineAction& a : one_rank.ranks[0]) EXPECT_EQ(a.peer, -1) << describe(a);
}

TEST(PipelineSchedule, MissingReceiveIsADeadlockNamingEachStuckRank) {
  PipelineSchedule s = make_schedule({ScheduleKind::OneFOneB, 2, 2, 1});
  s.ranks[1].erase(s.ranks[1].begin());  // rank 1 never receives micro-batch 0's activation
  EXPECT_EQ(refusal(s),
            "pipeline schedule 1f1b (p 2, m 2, v 1): deadlock: rank 0 waits forever at action 4 "
            "(recv gradient of micro-batch 0 on chunk 0 from rank 1); rank 1 waits forever at "
            "action 0 (forward of micro-batch 0 on chunk 0)");
}

TEST(PipelineSchedule, TwoStagesBothReceivingFirstIsADeadlock) {
  PipelineSchedule s = make_schedule({ScheduleKind::GPipe, 2, 1, 1});
  auto& rank0 = s.ranks[0];  // F0, send, recv gradient, B0: move the receive to the front
  std::rotate(rank0.begin(), rank0.begin() + 2, rank0.begin() + 3);
  EXPECT_EQ(refusal(s),
            "pipeline schedule gpipe (p 2, m 1, v 1): deadlock: rank 0 waits forever at action 0 "
            "(recv gradient of micro-batch 0 on chunk 0 from rank 1); rank 1 waits forever at "
            "action 0 (recv activation of micro-batch 0 on chunk 0 from rank 0)");
}

TEST(PipelineSchedule, OrderingMistakesOnOneRankAreRefused) {
  PipelineSchedule s = make_schedule({ScheduleKind::GPipe, 1, 1, 1});
  std::swap(s.ranks[0][0], s.ranks[0][1]);
  EXPECT_EQ(refusal(s),
            "pipeline schedule gpipe (p 1, m 1, v 1): rank 0 action 0 (backward of "
            "micro-batch 0 on chunk 0) runs before its forward");
  s = make_schedule({ScheduleKind::ZeroBubbleH1, 1, 1, 1});  // F, I, W
  std::swap(s.ranks[0][1], s.ranks[0][2]);
  EXPECT_EQ(refusal(s),
            "pipeline schedule zb-h1 (p 1, m 1, v 1): rank 0 action 1 (backward "
            "weight of micro-batch 0 on chunk 0) runs before its input gradient");
  s = make_schedule({ScheduleKind::ZeroBubbleH1, 1, 1, 1});
  s.ranks[0].pop_back();
  EXPECT_EQ(refusal(s),
            "pipeline schedule zb-h1 (p 1, m 1, v 1): rank 0 never runs the weight "
            "gradient of micro-batch 0 on chunk 0");
  s = make_schedule({ScheduleKind::GPipe, 3, 1, 1});
  s.ranks[1][0].peer = 2;
  EXPECT_EQ(refusal(s),
            "pipeline schedule gpipe (p 3, m 1, v 1): rank 1 action 0 (recv "
            "activation of micro-batch 0 on chunk 0 from rank 2) names rank 2; the "
            "neighbour stage is on rank 0");
  s = make_schedule({ScheduleKind::GPipe, 2, 1, 1});
  s.ranks[0].insert(s.ranks[0].begin() + 1, s.ranks[0][1]);
  EXPECT_EQ(refusal(s),
            "pipeline schedule gpipe (p 2, m 1, v 1): rank 0 action 2 (send "
            "activation of micro-batch 0 on chunk 0 to rank 1) sends it twice");
}

TEST(PipelineSchedule, TimelineShowsRanksAsRows) {
  const PipelineSchedule s = make_schedule({ScheduleKind::OneFOneB, 2, 2, 1});
  const ScheduleReport report = verify_schedule(s);  // F 1, B 2
  EXPECT_EQ(report.makespan, 9);
  EXPECT_EQ(render_timeline(s, report),
            "1f1b: p 2, m 2, v 1; bubble 0.3333\n"
            "rank 0 |F0|F1|. |. |B0|--|. |B1|--|\n"
            "rank 1 |. |F0|B0|--|F1|B1|--|. |. |\n");
  const PipelineSchedule interleaved = make_schedule({ScheduleKind::Interleaved, 2, 2, 2});
  const std::string text = render_timeline(interleaved, verify_schedule(interleaved));
  EXPECT_NE(text.find("rank 0 |F0a|F1a|F0b|F1b|"), std::string::npos) << text;
}

}  // namespace
}  // namespace chorus::train
