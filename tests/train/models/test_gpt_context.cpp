// The GPT model under Ulysses context parallelism (threads as ranks, fp64): at cp 1-4, with tp 2
// (with and without sequence parallelism) and with dp 2 (also tp 2 x dp 2 without cp), the
// loss of every step and every parameter after five SGD steps equal those of the model in one
// process on the same global batch, the gradients reduced over dp_cp by DataParallelSync; with
// steps that skip dp (--no-sync, --alternate-sync) every replica equals a one-process model of
// its own samples that takes the replicas' mean gradient in the synchronised steps only; the
// ledger holds exactly the collectives of PARALLEL.md section 2 per step (none over dp in an
// unsynchronised step); a checkpoint saved at tp 2 x cp 2 loads at cp 2 and in one process;
// bad layouts fail at construction with a sentence.
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/reducer.hpp>

#include "../checkpoint_test_util.hpp"
#include "../reducer/reducer_test_util.hpp"
#include "tiny_gpt.hpp"

#include <map>

namespace chorus::train {
namespace {

using namespace tp_test;
using reducer_test::on_mesh;
using tiny_gpt::kBatch, tiny_gpt::kHeads, tiny_gpt::kHidden, tiny_gpt::kLayers, tiny_gpt::kSeq;
using K = CollectiveKind;

constexpr std::int64_t kVocab = 10;
constexpr double kLearningRate = 0.5;
constexpr int kSteps = 5;

GptConfig config(bool sp) { return tiny_gpt::config(kVocab, 23, sp); }

/// What a run leaves: the loss of every step (the mean over the global batch) and every
/// parameter, whole and with the vocabulary unpadded, after the last step.
struct Trajectory {
  std::vector<at::Tensor> losses;
  std::map<std::string, at::Tensor> parameters;
};

void sgd_step(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    p.sub_(p.grad() * kLearningRate);
    p.mutable_grad().zero_();
  }
}

/// This rank's parameters, tp shards reassembled, the embedding's padded rows dropped.
std::map<std::string, at::Tensor> whole_parameters(const GptModel& model) {
  return tiny_gpt::whole_parameters(model, kVocab);
}

/// The one-process run: the whole batch [kSeq, kBatch] through the degree-1 model.
Trajectory reference_run() {
  Trajectory out;
  on_mesh(1, {}, [&out](Mesh& mesh) {
    const GptModel model(config(false), mesh.tp());
    for (int step = 0; step < kSteps; ++step) {
      const at::Tensor loss = model.loss(tiny_gpt::tokens(kVocab), tiny_gpt::targets(kVocab));
      loss.backward();
      out.losses.push_back(loss.detach());
      sgd_step(model.parameters());
    }
    out.parameters = whole_parameters(model);
  });
  return out;
}

const Trajectory& reference() {
  static const Trajectory trajectory = reference_run();
  return trajectory;
}

struct Layout {
  int tp = 1, cp = 1, dp = 1;
  bool sp = false;
  /// Steps that skip dp: blocks of `alternate` synchronised and `alternate` unsynchronised
  /// steps take turns (0: every step synchronised); `no_sync`: no step is.
  int alternate = 0;
  bool no_sync = false;
  bool synced(int step) const {
    return !no_sync && (alternate == 0 || (step / alternate) % 2 == 0);
  }
  bool unsynced_steps() const { return no_sync || alternate > 0; }
  std::string describe() const {
    return "tp " + std::to_string(tp) + (sp ? " (sp)" : "") + " x cp " + std::to_string(cp) +
           " x dp " + std::to_string(dp) + (no_sync ? ", no sync" : "") +
           (alternate > 0 ? ", alternate " + std::to_string(alternate) : "");
  }
};

/// The replicas of a layout with unsynchronised steps, each as a one-process model on its
/// kBatch/dp samples: in a synchronised step every replica takes the mean of the replicas'
/// gradients (the global batch's gradient), in an unsynchronised one its own. Replica d's
/// losses are its own samples' mean.
std::vector<Trajectory> replicas_run(const Layout& layout) {
  std::vector<Trajectory> out(static_cast<std::size_t>(layout.dp));
  on_mesh(1, {}, [&](Mesh& mesh) {
    std::vector<GptModel> models;
    for (int d = 0; d < layout.dp; ++d) models.emplace_back(config(false), mesh.tp());
    const std::int64_t b = kBatch / layout.dp;
    for (int step = 0; step < kSteps; ++step) {
      for (int d = 0; d < layout.dp; ++d) {
        const at::Tensor loss = models[d].loss(tiny_gpt::tokens(kVocab).narrow(1, d * b, b),
                                               tiny_gpt::targets(kVocab).narrow(1, d * b, b));
        loss.backward();
        out[d].losses.push_back(loss.detach());
      }
      if (layout.synced(step)) {
        at::NoGradGuard no_grad;
        for (std::size_t i = 0; i < models[0].parameters().size(); ++i) {
          at::Tensor mean = at::zeros_like(models[0].parameters()[i]);
          for (const GptModel& m : models) mean += m.parameters()[i].grad() / layout.dp;
          for (const GptModel& m : models) m.parameters()[i].mutable_grad().copy_(mean);
        }
      }
      for (const GptModel& m : models) sgd_step(m.parameters());
    }
    for (int d = 0; d < layout.dp; ++d) out[d].parameters = whole_parameters(models[d]);
  });
  return out;
}

/// Adds `calls` entries of `bytes` each on (group, kind) when the group has more than one rank.
void expect(LedgerTotals& totals, const Group& g, K kind, std::size_t calls, std::size_t bytes) {
  if (g.size() == 1 || calls == 0) return;
  LedgerTotal& t = totals[{g.name, kind}];
  t.calls += calls;
  t.bytes += calls * bytes;
}

/// The totals of the entries recorded since the last call equal `expected`.
void expect_totals(const Mesh& mesh, const LedgerTotals& expected, const std::string& what) {
  const std::vector<LedgerEntry> entries = mesh.ledger()->take();
  CollectiveLedger got;
  got.enable();
  for (const LedgerEntry& e : entries) got.record(e.group, e.kind, e.bytes);
  EXPECT_EQ(got.totals(), expected) << what << ": got " << describe(entries);
}

// One step on a replica of b = kBatch/dp samples, with rows = s/u tokens per cp rank,
// act = b·rows·h and tok = b·rows elements (PARALLEL.md section 2; test_gpt.cpp's tp counts):
//   tp: forward 2L + 1 all-reduces of act and 3 of tok (under SP: 2L + 1 all-gathers and 2L + 1
//   reduce-scatters of act, and the 3 of tok), backward 2L + 1 of act (SP: the same pairs);
//   then, under SP, one all-reduce of the partial gradients;
//   cp: per block one all-to-all of the fused QKV (b·rows·3h/t) and one of the context
//   (b·rows·h/t) forward, the same two backward; one all-reduce of the scalar loss forward;
//   dp_cp: the reducer's one all-reduce per bucket of the parameters' bytes.
// With a `checkpoint` path, the trained model is saved there at the end. Returns the trained
// parameters, whole (world rank 0's view).
std::map<std::string, at::Tensor> check_layout(const Layout& layout,
                                               const std::string& checkpoint = "") {
  SCOPED_TRACE(layout.describe());
  const std::vector<Trajectory> replicas =
      layout.unsynced_steps() ? replicas_run(layout) : std::vector<Trajectory>{};
  const int world = layout.tp * layout.cp * layout.dp;
  std::map<std::string, at::Tensor> trained;
  on_mesh(world, {.dp = layout.dp, .cp = layout.cp, .tp = layout.tp}, [&](Mesh& mesh) {
    const GptModel model(config(layout.sp), mesh.tp(), mesh.cp());
    DataParallelSync sync(model.parameters(), mesh, {}, layout.unsynced_steps());
    expect_totals(mesh, {}, "construction");
    // A replica's own model, or the one-process model of the global batch.
    const Trajectory& want =
        layout.unsynced_steps() ? replicas[mesh.coordinates().dp] : reference();

    const std::int64_t b = kBatch / layout.dp, rows = kSeq / layout.cp;
    const std::size_t act = b * rows * kHidden * sizeof(double);
    const std::size_t tok = b * rows * sizeof(double);
    const std::size_t blocks = 2 * kLayers + 1, t = layout.tp;
    std::size_t parameter_bytes = 0, partial_bytes = 0;
    for (const at::Tensor& p : model.parameters()) parameter_bytes += p.nbytes();
    for (const at::Tensor& p : model.partial_gradient_parameters()) partial_bytes += p.nbytes();
    LedgerTotals forward, backward, partial;
    if (layout.sp) {
      for (LedgerTotals* totals : {&forward, &backward}) {
        expect(*totals, mesh.tp(), K::AllGather, blocks, act);
        expect(*totals, mesh.tp(), K::ReduceScatter, blocks, act);
      }
      // Each block's two column-parallel layers gather their input again in backward.
      expect(backward, mesh.tp(), K::AllGather, 2 * kLayers, act);
      expect(partial, mesh.tp(), K::AllReduce, 1, partial_bytes);
    } else {
      expect(forward, mesh.tp(), K::AllReduce, blocks, act);
      expect(backward, mesh.tp(), K::AllReduce, blocks, act);
    }
    expect(forward, mesh.tp(), K::AllReduce, 3, tok);
    for (LedgerTotals* totals : {&forward, &backward}) {
      expect(*totals, mesh.cp(), K::AllToAll, kLayers, act * 3 / t);
      expect(*totals, mesh.cp(), K::AllToAll, kLayers, act / t);
    }
    expect(forward, mesh.cp(), K::AllReduce, 1, sizeof(double));
    // Then the buckets' all-reduces: over dp_cp, or over cp alone in an unsynchronised step.
    const std::size_t buckets = sync.synced_reducer().bucket_assignment().size();
    LedgerTotals unsynced_backward = backward;
    expect(backward, mesh.data_context(), K::AllReduce, buckets, parameter_bytes / buckets);
    expect(unsynced_backward, mesh.cp(), K::AllReduce, buckets, parameter_bytes / buckets);
    ASSERT_EQ(buckets, 1u) << "the tiny model fits the first bucket";

    const at::Tensor tokens = tiny_gpt::tokens(kVocab).narrow(1, mesh.coordinates().dp * b, b);
    const at::Tensor targets = tiny_gpt::targets(kVocab).narrow(1, mesh.coordinates().dp * b, b);
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const at::Tensor loss = model.loss(tokens, targets);
      expect_totals(mesh, forward, "forward");
      const bool synced = layout.synced(step);
      sync.begin_step(synced);
      loss.backward();
      sync.finish_step();
      expect_totals(mesh, synced ? backward : unsynced_backward, "backward");
      all_reduce_partial_gradients(model.partial_gradient_parameters(), mesh.tp());
      expect_totals(mesh, partial, "partial gradients");
      const at::Tensor mean =
          layout.unsynced_steps() ? loss.detach() : sum_over(mesh.dp(), loss.detach()) / layout.dp;
      expect_close(mean, want.losses[static_cast<std::size_t>(step)], "loss");
      sgd_step(model.parameters());
    }
    const std::map<std::string, at::Tensor> whole = whole_parameters(model);
    for (const auto& [name, tensor] : whole) expect_close(tensor, want.parameters.at(name), name);
    if (mesh.world().rank() == 0) trained = whole;
    if (!checkpoint.empty()) save_gpt_checkpoint(checkpoint, model, {}, mesh.world());
  });
  return trained;
}

TEST(GptContextParallel, MatchesTheOneProcessModelAtCp1To4) {
  for (int u = 1; u <= 4; ++u) check_layout({.cp = u});
}

TEST(GptContextParallel, MatchesTheOneProcessModelWithTp2) {
  check_layout({.tp = 2, .cp = 2});
  check_layout({.tp = 2, .cp = 2, .sp = true});
}

TEST(GptContextParallel, MatchesTheOneProcessModelWithDp2) {
  check_layout({.cp = 2, .dp = 2});
  check_layout({.tp = 2, .dp = 2});
  check_layout({.tp = 2, .dp = 2, .sp = true});
}

// --no-sync and --alternate-sync on the dp dimension of tp, sp and cp layouts.
TEST(GptDataParallelSync, StepsWithoutSyncMatchEachReplicasOwnModel) {
  check_layout({.dp = 2, .no_sync = true});
  check_layout({.tp = 2, .dp = 2, .alternate = 2});
  check_layout({.tp = 2, .dp = 2, .sp = true, .alternate = 1});
  check_layout({.cp = 2, .dp = 2, .alternate = 2});
  check_layout({.cp = 2, .dp = 2, .no_sync = true});
}

TEST(GptDataParallelSync, AnUnsynchronisedStepNeedsItsReducer) {
  on_mesh(2, {.dp = 2}, [](Mesh& mesh) {
    const GptModel model(config(false), mesh.tp());
    ReducerOptions options;
    options.zero_missing = true;  // no backward in this step: every gradient reduced as zeros
    DataParallelSync sync(model.parameters(), mesh, options, false);
    EXPECT_EQ(chorus::testing::error_of(Status::InvalidUsage, [&] { sync.begin_step(false); }),
              "DataParallelSync::begin_step: an unsynchronised step needs unsynced_steps at "
              "construction");
    sync.begin_step(true);
    EXPECT_EQ(sync.replica_group().name, "dp_cp");
    EXPECT_EQ(chorus::testing::error_of(Status::InvalidUsage, [&] { sync.begin_step(true); }),
              "DataParallelSync::begin_step: a step is active");
    sync.finish_step();
  });
}

// The parameters are replicated over cp, so the checkpoint is the tp layout's: the trained
// tensors load at another tp and cp, and alone, bit for bit.
TEST(GptContextParallel, ACheckpointLoadsAtAnotherCpDegree) {
  chorus::testing::TempDir dir("gpt_cp");
  const std::string path = dir.file("ck");
  const std::map<std::string, at::Tensor> saved = check_layout({.tp = 2, .cp = 2}, path);
  for (const MeshDegrees degrees : {MeshDegrees{.cp = 2}, MeshDegrees{}}) {
    on_mesh(degrees.cp, degrees, [&](Mesh& mesh) {
      GptModel model(config(false), mesh.tp(), mesh.cp());
      load_gpt_checkpoint(path, model);
      for (const auto& [name, tensor] : whole_parameters(model))
        EXPECT_TRUE(at::equal(tensor, saved.at(name))) << name;
    });
  }
}

void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error: expected " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(GptContextParallel, BadShapesAreSentences) {
  on_mesh(4, {.cp = 4}, [](Mesh& mesh) {
    GptConfig c = config(false);
    c.heads = 6;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp()); },
                 "GptModel (context parallel): heads 6 / tp 1 = 6 per rank is not a multiple of "
                 "the cp group's 4 ranks");
    c = config(false);
    c.sequence = 10;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp()); },
                 "GptModel (context parallel): sequence 10 is not a multiple of the cp group's 4 "
                 "ranks");
    const GptModel model(config(false), mesh.tp(), mesh.cp());
    const at::Tensor ten = at::zeros({10, kBatch}, at::kLong);
    expect_error([&] { model.loss(ten, ten); },
                 "GptModel (context parallel): a sequence of 10 tokens is not a multiple of the "
                 "cp group's 4 ranks");
    expect_totals(mesh, {}, "nothing communicated");
  });
  on_mesh(4, {.cp = 2, .tp = 2}, [](Mesh& mesh) {
    GptConfig c = config(false);
    c.heads = 6;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp()); },
                 "GptModel (context parallel): heads 6 / tp 2 = 3 per rank is not a multiple of "
                 "the cp group's 2 ranks");
    c = config(true);
    c.sequence = 6;
    expect_error([&] { GptModel(c, mesh.tp(), mesh.cp()); },
                 "GptModel (context and sequence parallel): sequence 6 is not a multiple of tp 2 "
                 "· cp 2 = 4 ranks");
    expect_totals(mesh, {}, "nothing communicated");
  });
}

}  // namespace
}  // namespace chorus::train
