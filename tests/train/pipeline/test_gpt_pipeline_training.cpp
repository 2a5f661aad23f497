// What a training loop needs of the pipelined GPT besides its step (threads as ranks, fp64,
// against the one-process model, rtol 1e-10): the forward-only evaluation, the
// replication-aware global gradient norm over {tp, pp}, each logical parameter counted once,
// data parallelism: dp 2 x pp 2 with the gradient reducer and global-norm clipping training
// as the one-process model on the global batch; and stage-local parameters: a rank allocates
// only its stages' parameters.
#include <chorus/train/pipeline.hpp>
#include <chorus/train/reducer.hpp>

#include "pipeline_test_util.hpp"

#include <cmath>
#include <map>
#include <string>

namespace chorus::train {
namespace {

using namespace pp_test;
using tp_test::expect_close;

/// Micro-batches of different lengths and sizes (any number: evaluation has no schedule).
std::vector<MicroBatch> uneven_micro_batches() {
  std::vector<MicroBatch> out;
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{
      {6, 2}, {3, 1}, {5, 3}, {6, 1}, {2, 2}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [t, y] = batch(static_cast<int>(i), shapes[i].second, shapes[i].first);
    out.push_back({t, y});
  }
  return out;
}

/// The one-process model's mean token loss over `micro_batches`.
at::Tensor reference_loss(const GptModel& model, const std::vector<MicroBatch>& micro_batches) {
  double tokens = 0;
  for (const MicroBatch& mb : micro_batches) tokens += static_cast<double>(mb.tokens.numel());
  at::Tensor sum = at::zeros({}, at::kDouble);
  for (const MicroBatch& mb : micro_batches)
    sum = sum + model.loss(mb.tokens, mb.targets) * (static_cast<double>(mb.tokens.numel()));
  return sum / tokens;
}

void check_evaluation(const ScheduleOptions& schedule, int tp) {
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(schedule.stages) +
               " tp " + std::to_string(tp));
  chorus::testing::ThreadJob job(schedule.stages * tp);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = schedule.stages, .tp = tp}, .embedding_group = true});
    GptPipeline pipeline(config(4), groups_of(mesh), options(schedule));
    const GptModel reference(config(4), mesh.tp());
    const std::vector<MicroBatch> micro_batches = uneven_micro_batches();
    const at::Tensor loss = pipeline.evaluate(micro_batches);
    ASSERT_EQ(loss.defined(), pipeline.holds_loss());
    if (loss.defined()) {
      EXPECT_FALSE(loss.requires_grad());
      at::NoGradGuard no_grad;
      expect_close(loss, reference_loss(reference, micro_batches), "evaluation loss");
    }
    for (const at::Tensor& p : pipeline.parameters()) EXPECT_FALSE(p.grad().defined());
    EXPECT_FALSE(pipeline.evaluate({}).defined());  // nothing to evaluate: no loss anywhere
  });
}

// Five micro-batches of other shapes through 2 and 3 stages, interleaved chunks included, and
// tensor-parallel stages: the mean token loss of the one-process model, no gradient made.
TEST(GptPipelineTraining, EvaluationIsTheOneProcessLoss) {
  check_evaluation({ScheduleKind::OneFOneB, 3, 1, 1}, 1);
  check_evaluation({ScheduleKind::Interleaved, 2, 2, 2}, 1);
  check_evaluation({ScheduleKind::GPipe, 2, 1, 1}, 2);
  check_evaluation({ScheduleKind::GPipe, 1, 1, 1}, 1);
}

/// The global gradient norm of the pipeline's pieces over {tp, pp} equals the one-process
/// model's, and clipping leaves the pipeline's gradients equal to the clipped reference's.
void check_norm(const ScheduleOptions& schedule, int tp) {
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(schedule.stages) +
               " v " + std::to_string(schedule.chunks) + " tp " + std::to_string(tp));
  chorus::testing::ThreadJob job(schedule.stages * tp);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = schedule.stages, .tp = tp}, .embedding_group = true});
    GptPipeline pipeline(config(4), groups_of(mesh), options(schedule));
    const GptModel reference(config(4), mesh.tp());
    const int m = schedule.micro_batches;
    const auto [tokens, targets] = batch(0, 2 * m);
    pipeline.forward_backward(split_micro_batches(tokens, targets, m));
    reference.loss(tokens, targets).backward();
    double squares = 0;  // the tp shards' squares, summed over tp below
    double replicated = 0;
    for (const GptParameter& q : reference.named_parameters()) {
      const double s = q.tensor.grad().pow(2).sum().item<double>();
      (q.shard_dim >= 0 ? squares : replicated) += s;
    }
    Communicator tp_comm = mesh.tp().comm;
    tp_comm.all_reduce(&squares, &squares, 1, DataType::Float64, ReduceOp::Sum);
    const double expected = std::sqrt(squares + replicated);
    const std::vector<Group> groups{mesh.tp(), mesh.pp()};
    EXPECT_NEAR(global_grad_norm(pipeline.norm_pieces(), groups), expected, 1e-10 * expected);
    const double max_norm = expected / 3;
    clip_grad_norm(pipeline.norm_pieces(), groups, max_norm);
    std::map<std::string, at::Tensor> clipped;
    for (const GptParameter& q : reference.named_parameters())
      clipped[q.name] = q.tensor.grad() * (max_norm / (expected + 1e-6));
    for (const GptParameter& q : pipeline.named_parameters())
      expect_close(q.tensor.grad(), clipped.at(q.name), q.name + " clipped gradient");
  });
}

// The tied embedding on the first and last stage counted once; every stage's parameters and
// tp's shards and replicas each once; interleaved chunks on one rank.
TEST(GptPipelineTraining, GlobalNormCountsEveryParameterOnce) {
  check_norm({ScheduleKind::OneFOneB, 3, 3, 1}, 1);
  check_norm({ScheduleKind::Interleaved, 2, 2, 2}, 1);
  check_norm({ScheduleKind::ZeroBubbleH1, 2, 2, 1}, 2);
  check_norm({ScheduleKind::GPipe, 1, 2, 1}, 1);
}

std::int64_t numel(const std::vector<at::Tensor>& tensors) {
  std::int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.numel();
  return n;
}

/// Every rank's model holds exactly its virtual stages' parameters: their blocks
/// (12h² + 13h each), the embedding (V·h) with the first or last stage, the position
/// embedding (s·h) with the first, the final norm (2h) with the last; over all ranks that is
/// the whole model once, the tied embedding twice when p > 1. A part not built is refused.
void check_stage_parameters(const ScheduleOptions& schedule, std::int64_t layers) {
  const int p = schedule.stages;
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(p) + " v " +
               std::to_string(schedule.chunks) + " layers " + std::to_string(layers));
  chorus::testing::ThreadJob job(p);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    const GptConfig c = config(layers);
    GptPipeline pipeline(c, groups_of(mesh), options(schedule));
    const std::int64_t h = c.hidden, block = 12 * h * h + 13 * h, embedding = c.vocab * h;
    const int r = mesh.coordinates().pp, last = p * schedule.chunks - 1;
    std::int64_t expected = 0;
    for (int v = r; v <= last; v += p) expected += pipeline.layers_per_stage()[v] * block;
    if (r == 0) expected += embedding + c.sequence * h;
    if (r == last % p) expected += (r == 0 ? 0 : embedding) + 2 * h;
    const std::int64_t built = numel(pipeline.model().parameters());
    EXPECT_EQ(built, expected);
    EXPECT_EQ(numel(pipeline.parameters()), built);
    std::int64_t total = built;
    Communicator pp = mesh.pp().comm;
    pp.all_reduce(&total, &total, 1, DataType::Int64, ReduceOp::Sum);
    const std::int64_t whole = numel(GptModel(c, mesh.tp()).parameters());
    EXPECT_EQ(total, whole + (p > 1 ? embedding : 0));
    if (r != 0) {
      try {
        (void)pipeline.model().embed(batch(0, 1).first);
        ADD_FAILURE() << "rank " << r << " embedded without the embedding";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::InvalidUsage);
        EXPECT_STREQ(e.what(), "GptModel: the position embedding is not built here");
      }
    }
  });
}

TEST(GptPipelineTraining, EachRankBuildsOnlyItsStages) {
  check_stage_parameters({ScheduleKind::OneFOneB, 3, 3, 1}, 4);
  check_stage_parameters({ScheduleKind::Interleaved, 2, 2, 2}, 5);
  check_stage_parameters({ScheduleKind::GPipe, 4, 1, 1}, 4);
  check_stage_parameters({ScheduleKind::GPipe, 1, 1, 1}, 2);
  check_stage_parameters({ScheduleKind::Interleaved, 1, 1, 2}, 2);
}

constexpr int kSteps = 3;

/// The one-process model's step on the global batch: its gradient's norm, then the gradients
/// clipped to `max_norm` as clip_grad_norm does.
double reference_step(const GptModel& model, const at::Tensor& tokens, const at::Tensor& targets,
                      double& max_norm) {
  model.loss(tokens, targets).backward();
  double squares = 0;
  for (const at::Tensor& p : model.parameters()) squares += p.grad().pow(2).sum().item<double>();
  const double norm = std::sqrt(squares);
  max_norm = norm / 2;  // every step clips
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : model.parameters()) p.mutable_grad().mul_(max_norm / (norm + 1e-6));
  return norm;
}

/// dp 2 replicas of a p-stage pipeline (world 2p): replica r takes samples [r·n, (r+1)·n) of
/// the global batch of 2n; the reducer (small buckets, several per stage) averages each
/// stage's gradients over its dp group as the pipeline marks them ready; the gradients are
/// clipped over {tp, pp, dp}. Loss, norm and gradients every step and the parameters after
/// kSteps SGD steps equal the one-process model's.
void check_data_parallel(const ScheduleOptions& schedule) {
  const int p = schedule.stages, m = schedule.micro_batches, d = 2;
  SCOPED_TRACE(std::string(to_string(schedule.kind)) + " p " + std::to_string(p) + " m " +
               std::to_string(m) + " v " + std::to_string(schedule.chunks));
  chorus::testing::ThreadJob job(p * d);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p, .dp = d}, .embedding_group = true});
    GptPipeline pipeline(config(4), groups_of(mesh), options(schedule));
    ReducerOptions reducer_options;
    reducer_options.autograd_hooks = false;
    reducer_options.first_bucket_bytes = 256;
    reducer_options.bucket_cap_bytes = 2048;
    GradientReducer reducer(pipeline.parameters(), mesh.dp(), reducer_options);
    const GptModel reference(config(4), mesh.tp());
    const std::map<std::string, at::Tensor> expected = by_name(reference);
    const std::int64_t n = 2 * m;  // samples per replica
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto [tokens, targets] = batch(step, d * n);
      const std::int64_t first = mesh.coordinates().dp * n;
      reducer.begin_step();
      at::Tensor loss = pipeline.forward_backward(
          split_micro_batches(tokens.narrow(1, first, n), targets.narrow(1, first, n), m),
          &reducer);
      reducer.finish_step();
      const std::vector<Group> groups{mesh.tp(), mesh.pp(), mesh.dp()};
      double max_norm = 0;
      const double expected_norm = reference_step(reference, tokens, targets, max_norm);
      const double norm = clip_grad_norm(pipeline.norm_pieces(1), groups, max_norm);
      EXPECT_NEAR(norm, expected_norm, 1e-10 * expected_norm);
      if (loss.defined()) {  // the replicas' mean loss is the global batch's
        double value = loss.item<double>();
        Communicator dp = mesh.dp().comm;
        dp.all_reduce(&value, &value, 1, DataType::Float64, ReduceOp::Sum);
        at::NoGradGuard no_grad;
        expect_close(at::scalar_tensor(value / d, at::kDouble), reference.loss(tokens, targets),
                     "loss");
      }
      expect_gradients_then_step(pipeline, reference, expected);
    }
    expect_parameters(pipeline, expected);
    // Every bucket was started by the pipeline's mark_ready, none left for finish_step.
    EXPECT_EQ(reducer.stats().buckets_launched_early,
              static_cast<std::int64_t>(reducer.bucket_assignment().size()) * kSteps);
  });
}

TEST(GptPipelineTraining, DataParallelTimesPipelineMatchesTheOneProcessModel) {
  check_data_parallel({ScheduleKind::OneFOneB, 2, 2, 1});
  check_data_parallel({ScheduleKind::ZeroBubbleH1, 2, 3, 1});
  check_data_parallel({ScheduleKind::Interleaved, 2, 2, 2});
  check_data_parallel({ScheduleKind::GPipe, 1, 2, 1});
}

// Synthetic compute: every computation is a sleep of its cost (ZB-H1: F, B and W of 1, 2 and
// 1 units) and leaves a zero loss on the last stage and zero gradients, the messages stay
// real, and the ranks agree on the measured bubble (a value in [0, 1);
// bench/gpt/pipeline_bubble.sh compares it with the verifier's on an otherwise idle pipeline).
TEST(GptPipelineTraining, SyntheticComputeSleepsEachActionsCost) {
  constexpr int p = 2;
  constexpr double unit = 0.004;
  chorus::testing::ThreadJob job(p);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    PipelineOptions o = options(ScheduleKind::ZeroBubbleH1, p, 4);
    o.costs = {1, 2, 1};
    o.synthetic_compute = unit;
    GptPipeline pipeline(config(4), groups_of(mesh), o);
    const auto [tokens, targets] = batch(0, 8);
    Communicator pp = mesh.pp().comm;
    pp.barrier();
    const at::Tensor loss = pipeline.forward_backward(split_micro_batches(tokens, targets, 4));
    ASSERT_EQ(loss.defined(), pipeline.holds_loss());
    if (loss.defined()) {
      EXPECT_EQ(loss.item<double>(), 0);
    }
    for (const at::Tensor& q : pipeline.parameters()) {  // zeros, to be reduced like gradients
      ASSERT_TRUE(q.grad().defined());
      EXPECT_EQ(q.grad().abs().sum().item<double>(), 0);
    }
    const PipelineRecord& record = pipeline.last_record();
    EXPECT_EQ(record.computations.size(), 3u * 4u);  // F, B and W of each micro-batch
    for (const TimedAction& t : record.computations) {
      const double cost = t.action.op == PipelineOp::BackwardInput ? 2 : 1;
      EXPECT_GE(t.end - t.start, cost * unit * 0.99) << describe(t.action);
    }
    EXPECT_EQ(record.receives.size(), 4u);
    const double bubble = measured_bubble(mesh.pp(), record);
    EXPECT_GE(bubble, 0);
    EXPECT_LT(bubble, 1);
    double rank0 = bubble;
    pp.broadcast(&bubble, &rank0, 1, DataType::Float64, 0);
    EXPECT_EQ(bubble, rank0);
  });
}

// Synthetic compute on pp 2 x tp 2 with a cost per stage: each computation sleeps its own
// stage's cost, each block's two tp all-reduces per forward and per backward stay real (plus
// the embedding's on stage 0's forward and the head's on stage 1's backward) and nothing else
// runs on tp; gather_computations gives every rank each rank's record.
TEST(GptPipelineTraining, SyntheticComputeKeepsTheTensorParallelAllReduces) {
  constexpr int p = 2, m = 3;
  constexpr double unit = 0.002;
  chorus::testing::ThreadJob job(4);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.pp = p, .tp = 2}, .embedding_group = true});
    PipelineOptions o = options(ScheduleKind::OneFOneB, p, m);
    o.stage_costs = {{1, 2, 1}, {3, 1, 1}};
    o.synthetic_compute = unit;
    GptPipeline pipeline(config(4), groups_of(mesh), o);
    mesh.ledger()->enable();
    const auto [tokens, targets] = batch(0, 2 * m);
    Communicator pp = mesh.pp().comm;
    pp.barrier();
    pipeline.forward_backward(split_micro_batches(tokens, targets, m));
    mesh.ledger()->disable();
    const int s = mesh.coordinates().pp;
    const std::size_t calls = m * (2 * 2 + 2 * 2 + 1);  // 2 blocks a stage, + embedding or head
    const LedgerTotal tp = mesh.ledger()->totals()[{"tp", CollectiveKind::AllReduce}];
    EXPECT_EQ(tp.calls, calls);
    EXPECT_EQ(tp.bytes, calls * 6 * 2 * 8 * sizeof(double));
    const PipelineRecord& record = pipeline.last_record();
    for (const TimedAction& t : record.computations) {
      const ActionCosts& c = o.stage_costs[static_cast<std::size_t>(s)];
      const double cost =
          t.action.op == PipelineOp::Forward ? c.forward : c.backward_input + c.backward_weight;
      EXPECT_GE(t.end - t.start, cost * unit * 0.99) << describe(t.action);
    }
    const auto rows = gather_computations(mesh.pp(), record);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].size(), 2u * m);
    EXPECT_EQ(rows[1].size(), 2u * m);
    for (std::size_t k = 0; k < record.computations.size(); ++k) {
      EXPECT_EQ(rows[s][k].action, record.computations[k].action);
      EXPECT_EQ(rows[s][k].start, record.computations[k].start);
      EXPECT_EQ(rows[s][k].end, record.computations[k].end);
    }
  });
}

// Synthetic compute does not reproduce sequence parallelism's collectives: refused.
TEST(GptPipelineTraining, SyntheticComputeRefusesSequenceParallelism) {
  chorus::testing::ThreadJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    const Mesh mesh(world, {.degrees = {.tp = 2}});
    GptConfig c = config(2);
    c.sequence_parallel = true;
    PipelineOptions o = options(ScheduleKind::OneFOneB, 1, 1);
    o.synthetic_compute = 0.001;
    try {
      GptPipeline pipeline(c, groups_of(mesh), o);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "GptPipeline: synthetic compute does not reproduce the collectives of "
                   "sequence parallelism");
    }
  });
}

}  // namespace
}  // namespace chorus::train
