// The pipelined GPT against the one-process model (PARALLEL.md section 4.1): for p 1-4 and
// m in {1, p, 3p + 1} where the schedule allows it, the loss every step and every parameter
// after three SGD steps equal those of the GPT model over the whole batch in one process
// (threads as ranks, fp64, rtol 1e-10, tied embeddings across the first and last stage); the
// ledger's point-to-point messages; mismatched shapes named; bad layouts refused.
#include <chorus/train/pipeline.hpp>
#include <chorus/train/pipeline_partition.hpp>

#include "pipeline_test_util.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

using tp_test::expect_close;

using namespace pp_test;

constexpr int kSteps = 3;

/// Trains the pipeline and the model without pipelining side by side for kSteps steps: with
/// tp 1 that is the one-process model; with tp t both hold the same tensor-parallel shards
/// (the tp model itself matches the one-process model in test_train_gpt).
void check_equivalence(const ScheduleOptions& schedule, int tp = 1) {
  const int p = schedule.stages, m = schedule.micro_batches;
  const std::int64_t layers = std::max(4, p * schedule.chunks);
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(p) + " m " +
               std::to_string(m) + " v " + std::to_string(schedule.chunks) + " tp " +
               std::to_string(tp));
  chorus::testing::ThreadJob job(p * tp);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p, .tp = tp}, .embedding_group = true});
    GptPipeline pipeline(config(layers), groups_of(mesh), options(schedule));
    const GptModel reference(config(layers), mesh.tp());
    const std::map<std::string, at::Tensor> expected = by_name(reference);
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto [tokens, targets] = batch(step, 2 * m);
      const at::Tensor loss = pipeline.forward_backward(split_micro_batches(tokens, targets, m));
      const at::Tensor reference_loss = reference.loss(tokens, targets);
      reference_loss.backward();
      ASSERT_EQ(loss.defined(), pipeline.holds_loss());
      if (loss.defined()) expect_close(loss, reference_loss, "loss");
      expect_gradients_then_step(pipeline, reference, expected);
    }
    expect_parameters(pipeline, expected);
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
// Tensor parallelism inside each stage: pp 2 × tp 2 on 4 ranks.
TEST(GptPipeline, TensorParallelStagesMatchTheTensorParallelModel) {
  check_equivalence({ScheduleKind::OneFOneB, 2, 3, 1}, 2);
  check_equivalence({ScheduleKind::ZeroBubbleH1, 2, 2, 1}, 2);
}

}  // namespace
}  // namespace chorus::train

namespace chorus::train {
namespace {

using tp_test::expect_close;

using namespace pp_test;

// Micro-batches of different lengths and sizes, an explicit partition: the loss is the sum of
// token losses over the whole batch's token count, as in the one-process model.
TEST(GptPipeline, VariableLengthsAndAnExplicitPartitionMatch) {
  chorus::testing::ThreadJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = 2}, .embedding_group = true});
    GptPipeline pipeline(config(4), groups_of(mesh),
                         options(ScheduleKind::OneFOneB, 2, 3, 1, {1, 3}));
    EXPECT_EQ(pipeline.layers_per_stage(), (std::vector<std::int64_t>{1, 3}));
    const GptModel reference(config(4), mesh.tp());
    const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{6, 2}, {3, 1}, {5, 3}};
    std::vector<MicroBatch> micro_batches;
    double tokens = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto [t, y] = batch(static_cast<int>(i), shapes[i].second, shapes[i].first);
      micro_batches.push_back({t, y});
      tokens += static_cast<double>(t.numel());
    }
    at::Tensor expected = at::zeros({}, at::kDouble);
    for (const MicroBatch& mb : micro_batches)
      expected = expected + reference.loss(mb.tokens, mb.targets) *
                                (static_cast<double>(mb.tokens.numel()) / tokens);
    expected.backward();
    const at::Tensor loss = pipeline.forward_backward(micro_batches);
    if (pipeline.holds_loss()) expect_close(loss, expected, "loss");
    std::map<std::string, at::Tensor> grads;
    for (const GptParameter& q : reference.named_parameters()) grads[q.name] = q.tensor.grad();
    for (const GptParameter& q : pipeline.named_parameters())
      expect_close(q.tensor.grad(), grads.at(q.name), q.name + " gradient");
  });
}

// Per step, a stage sends each micro-batch's activation forward and its input gradient back
// (b·s·h doubles each), receives the same from its neighbours, and the first and last stage
// all-reduce the embedding's gradient (V·h doubles) over the embedding group: nothing else.
TEST(GptPipeline, LedgerHoldsExactlyTheStageMessages) {
  constexpr int p = 3, m = 4;
  chorus::testing::ThreadJob job(p);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    GptPipeline pipeline(config(4), groups_of(mesh), options(ScheduleKind::OneFOneB, p, m));
    mesh.ledger()->enable();
    const auto [tokens, targets] = batch(0, 2 * m);
    pipeline.forward_backward(split_micro_batches(tokens, targets, m));
    const int r = mesh.coordinates().pp;
    const std::size_t act = 6 * 2 * 8 * sizeof(double);
    LedgerTotals expected;
    const auto add = [&](const char* group, CollectiveKind kind, std::size_t calls,
                         std::size_t bytes) {
      if (calls > 0) expected[{group, kind}] = {calls, calls * bytes};
    };
    const std::size_t neighbours = (r > 0 ? 1 : 0) + (r < p - 1 ? 1 : 0);
    add("pp", CollectiveKind::Send, neighbours * m, act);
    add("pp", CollectiveKind::Recv, neighbours * m, act);
    add("embedding", CollectiveKind::AllReduce, r == 0 || r == p - 1 ? 1 : 0, 10 * 8 * 8);
    EXPECT_EQ(mesh.ledger()->totals(), expected) << describe(mesh.ledger()->entries());
  });
}

/// This rank's ledger totals of one step of `schedule` on pp 2 × tp 2.
LedgerTotals ledger_of_step(const Mesh& mesh, ScheduleKind kind) {
  GptPipeline pipeline(config(4), groups_of(mesh), options(kind, 2, 4));
  mesh.ledger()->clear();
  mesh.ledger()->enable();
  const auto [tokens, targets] = batch(0, 8);
  pipeline.forward_backward(split_micro_batches(tokens, targets, 4));
  mesh.ledger()->disable();
  EXPECT_EQ(pipeline.model().pending_weight_gradients(), 0u);
  EXPECT_EQ(pipeline.model().config().defer_weight_gradients, kind == ScheduleKind::ZeroBubbleH1);
  return mesh.ledger()->totals();
}

// ZB-H1's W computes the deferred weight gradients (dyᵀ·x of the stage's linear layers) and
// nothing else: its step issues exactly 1F1B's collectives, where running the backward again
// at W would repeat the tensor-parallel all-reduces of the input gradients.
TEST(GptPipeline, ZeroBubbleWComputesOnlyTheWeightGradients) {
  chorus::testing::ThreadJob job(4);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = 2, .tp = 2}, .embedding_group = true});
    const LedgerTotals one_f_one_b = ledger_of_step(mesh, ScheduleKind::OneFOneB);
    EXPECT_EQ(ledger_of_step(mesh, ScheduleKind::ZeroBubbleH1), one_f_one_b);
  });
}

/// The start recorded for `action` in `timed` (which holds it once).
double start_of(const std::vector<TimedAction>& timed, const PipelineAction& action) {
  const auto it = std::find_if(timed.begin(), timed.end(),
                               [&](const TimedAction& t) { return t.action == action; });
  EXPECT_NE(it, timed.end()) << describe(action) << " not recorded";
  return it == timed.end() ? 0 : it->start;
}

// Every receive that follows a computation is posted before that computation starts, so its
// messages land while it runs (interleaved too, where several receives sit between two
// computations); and micro-batches of different lengths still pass.
TEST(GptPipeline, ReceivesArePostedBeforeTheComputationBeforeThem) {
  constexpr int p = 3;
  for (const ScheduleOptions& schedule : {ScheduleOptions{ScheduleKind::OneFOneB, p, 4, 1},
                                          ScheduleOptions{ScheduleKind::Interleaved, p, 3, 2}}) {
    SCOPED_TRACE(to_string(schedule.kind));
    chorus::testing::ThreadJob job(p);
    ASSERT_TRUE(job.ok());
    job.run([&](Communicator& world) {
      const Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
      GptPipeline pipeline(config(6), groups_of(mesh), options(schedule));
      std::vector<MicroBatch> micro_batches;
      for (int i = 0; i < schedule.micro_batches; ++i) {
        const auto [tokens, targets] = batch(0, 2, 3 + i);
        micro_batches.push_back({tokens, targets});
      }
      pipeline.forward_backward(micro_batches);
      const PipelineRecord& record = pipeline.last_record();
      const auto& actions = pipeline.schedule().ranks[static_cast<std::size_t>(mesh.pp().rank())];
      std::size_t ahead = 0;
      std::optional<PipelineAction> computation;  // the last one before the current action
      for (const PipelineAction& a : actions) {
        if (a.peer < 0) computation = a;
        const bool receive = a.op == PipelineOp::RecvActivation || a.op == PipelineOp::RecvGradient;
        if (!receive || !computation) continue;
        EXPECT_LE(start_of(record.receives, a), start_of(record.computations, *computation))
            << describe(a) << " posted after " << describe(*computation) << " started";
        ++ahead;
      }
      std::size_t messages = 0;  // per micro-batch: an activation and a gradient per neighbour
      for (int c = 0; c < schedule.chunks; ++c) {
        const int v = pipeline.schedule().virtual_stage(mesh.pp().rank(), c);
        messages += (v > 0 ? 1 : 0) + (v < p * schedule.chunks - 1 ? 1 : 0);
      }
      EXPECT_EQ(record.receives.size(), messages * schedule.micro_batches);
      EXPECT_GT(ahead, 0u);
    });
  }
}

std::string construction_error(const Mesh& mesh, const GptConfig& c, const PipelineOptions& o) {
  try {
    GptPipeline pipeline(c, groups_of(mesh), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "constructed";
}

TEST(GptPipeline, BadLayoutsFailAtConstructionNamingTheNumbers) {
  chorus::testing::ThreadJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = 2}, .embedding_group = true});
    EXPECT_EQ(construction_error(mesh, config(3), options(ScheduleKind::Interleaved, 2, 2, 2)),
              "pipeline partition: 3 layers for 4 stages; every stage needs a layer");
    EXPECT_EQ(construction_error(mesh, config(4), options(ScheduleKind::Interleaved, 2, 1, 2)),
              "pipeline schedule interleaved: 1 micro-batches for 2 stages; interleaving needs "
              "at least as many micro-batches as stages");
    EXPECT_EQ(construction_error(mesh, config(4), options(ScheduleKind::GPipe, 3, 2)),
              "GptPipeline: a schedule for 3 stages on a pipeline group of 2 ranks");
    EXPECT_EQ(construction_error(mesh, config(4), options(ScheduleKind::GPipe, 2, 2, 1, {3, 2})),
              "pipeline partition: layers per stage [3, 2] must be positive and sum to 4");
    try {
      GptPipeline pipeline(config(4), {mesh.pp(), mesh.tp(), std::nullopt, std::nullopt},
                           options(ScheduleKind::GPipe, 2, 2));
      ADD_FAILURE() << "built without the embedding group";
    } catch (const Error& e) {
      EXPECT_EQ(e.what(), "GptPipeline: pipeline rank " + std::to_string(mesh.pp().rank()) +
                              " of 2 holds the tied embedding and needs the embedding group of "
                              "2 ranks");
    }
    GptPipeline pipeline(config(4), groups_of(mesh), options(ScheduleKind::GPipe, 2, 2));
    const auto [tokens, targets] = batch(0, 3);
    EXPECT_THROW(split_micro_batches(tokens, targets, 2), Error);
  });
}

// Stages that disagree on a micro-batch's length: the receiver names both stages and shapes,
// and its abort makes the sender fail promptly instead of waiting for the timeout. Micro-batch
// 1's receive on stage 1 is posted ahead (before micro-batch 0's backward), micro-batch 0's
// when its action comes.
TEST(GptPipeline, AShapeMismatchNamesBothStagesAndShapes) {
  for (int bad = 0; bad < 2; ++bad) {
    chorus::testing::ThreadJob job(2);
    ASSERT_TRUE(job.ok());
    job.run([bad](Communicator& world) {
      const Mesh mesh(world, {.degrees = {.pp = 2}, .embedding_group = true});
      GptPipeline pipeline(config(4), groups_of(mesh), options(ScheduleKind::OneFOneB, 2, 2));
      const int r = mesh.pp().rank();
      std::vector<MicroBatch> micro_batches;
      for (int i = 0; i < 2; ++i) {
        const auto [tokens, targets] = batch(0, 2, i == bad && r == 0 ? 6 : 5);
        micro_batches.push_back({tokens, targets});
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        pipeline.forward_backward(micro_batches);
        ADD_FAILURE() << "rank " << r << " finished the step";
      } catch (const Error& e) {
        if (r == 1) {
          EXPECT_EQ(e.what(), "pipeline: stage 1 expects the activation of micro-batch " +
                                  std::to_string(bad) +
                                  " from stage 0 as Double [5, 2, 8]; stage 0 sent Double [6, "
                                  "2, 8]");
        }
      }
      world.barrier();  // the mesh lives on: only the abort can have released stage 0
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    });
  }
}

}  // namespace
}  // namespace chorus::train
