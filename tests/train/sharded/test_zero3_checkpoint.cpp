// ZeRO-3 checkpoints of the GPT model (gpt_zero3_state), threads as ranks, fp64, Adam: a run at
// dp 4 saved after 3 steps resumes at dp 4 bit-equal to the uninterrupted run and at dp 3 and
// one rank within 1e-10 of it; the one GPT checkpoint kind: it resumes at tp 2 x dp 2 with DDP
// (gpt_replicated_state) and with ZeRO-1 (gpt_zero_state), and a DDP run's checkpoint at tp 2 x
// dp 2 resumes under ZeRO-3 at dp 4, each within 1e-10 of the uninterrupted run; the saved
// parameters are the GPT checkpoint layout (the unsharded QKV order: one process's
// gpt_checkpoint_pieces read them back equal to its own after 3 steps); a checkpoint of another
// GPT is refused, naming what differs, before anything changes.
#include "zero3_test_util.hpp"

#include "../models/tiny_gpt.hpp"
#include "../reducer/reducer_test_util.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>

#include <unistd.h>

#include <filesystem>

namespace chorus::train::zero_test {
namespace {

constexpr int kSteps = 6, kSaveAt = 3;

std::unique_ptr<torch::optim::Optimizer> adam(std::vector<at::Tensor> params) {
  return gpt_optimizer(Opt::Adam, std::move(params));
}

at::Tensor tokens(int step, std::int64_t mul, std::int64_t add) {
  return gpt_tokens(static_cast<std::size_t>(step), mul, add);
}

struct Result {
  std::vector<double> losses;      ///< the global mean loss of each step taken
  std::vector<at::Tensor> params;  ///< every parameter after the last
};

/// Trains steps [from, to) at dp `ranks` under ZeRO-3, loading `load` first and saving `save`
/// after, when given.
Result run(int ranks, int from, int to, const std::string& load, const std::string& save) {
  Result result;
  on_ranks(ranks, [&](const Group& group, int rank) {
    Communicator comm = group.comm;
    const Group tp{comm.split(rank, 0), "tp", nullptr};
    GptModel model(gpt_config(), tp);
    Zero3 zero(model.parameters(), gpt_units(model), group, adam);
    ShardedState state = gpt_zero3_state(model, zero);
    const RunConfig description = gpt_model_description(model.config());
    if (!load.empty()) {
      EXPECT_EQ(load_sharded_checkpoint(load, description, state).step, from);
    }
    const std::int64_t cols = kGptBatch / ranks;
    for (int s = from; s < to; ++s) {
      zero.zero_grad();
      zero.begin_step();
      at::Tensor loss = gpt_loss(model, zero, tokens(s, 7, 3).narrow(1, rank * cols, cols),
                                 tokens(s, 5, 1).narrow(1, rank * cols, cols));
      loss.backward();
      zero.finish_step();
      zero.step();
      double mean[1] = {loss.item<double>()};
      comm.all_reduce(mean, mean, 1, DataType::Float64, ReduceOp::Avg);
      if (rank == 0) result.losses.push_back(mean[0]);
    }
    if (!save.empty()) save_sharded_checkpoint(save, description, state, {to, 0, {}, {}}, comm);
    const std::vector<at::Tensor> params = zero.full_parameters();
    if (rank == 0) result.params = params;
  });
  return result;
}

/// Trains steps [from, to) at tp 2 x dp 2, the optimizer over whole parameters (DDP: each
/// gradient averaged over dp by hand) or ZeRO-1 over dp, loading `load` first and saving `save`
/// after, when given; `params` in the order of the one-process model's parameters.
Result run_tp2(bool zero1, int from, int to, const std::string& load, const std::string& save) {
  Result result;
  reducer_test::on_mesh(4, {.dp = 2, .tp = 2}, [&](Mesh& mesh) {
    GptModel model(gpt_config(), mesh.tp());
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    std::unique_ptr<ZeroOptimizer> zero;
    ShardedState state;
    if (zero1) {
      ZeroOptions options;
      options.autograd_hooks = false;
      options.broadcast_parameters = false;
      zero = std::make_unique<ZeroOptimizer>(model.parameters(), mesh.dp(), adam, options);
      state = gpt_zero_state(model.named_parameters(), model.config(), mesh.tp(), *zero);
    } else {
      optimizer = adam(model.parameters());
      state = gpt_replicated_state(model.named_parameters(), model.config(), mesh.tp(), *optimizer,
                                   mesh.dp());
    }
    const RunConfig description = gpt_model_description(model.config());
    if (!load.empty()) {
      EXPECT_EQ(load_sharded_checkpoint(load, description, state).step, from);
      if (zero) zero->refresh_from_shards();
    }
    const std::int64_t cols = kGptBatch / 2, first = mesh.coordinates().dp * cols;
    for (int s = from; s < to; ++s) {
      if (zero) {
        zero->zero_grad();
        zero->begin_step();
      } else {
        optimizer->zero_grad();
      }
      const at::Tensor loss = model.loss(tokens(s, 7, 3).narrow(1, first, cols),
                                         tokens(s, 5, 1).narrow(1, first, cols));
      loss.backward();
      for (const at::Tensor& p : model.parameters()) {
        if (zero) {
          zero->mark_ready(p);
        } else {
          at::Tensor(p).mutable_grad() = tp_test::sum_over(mesh.dp(), p.grad()) / 2;
        }
      }
      if (zero) {
        zero->finish_step();
        zero->step();
      } else {
        optimizer->step();
      }
      const at::Tensor mean = tp_test::sum_over(mesh.dp(), loss.detach()) / 2;
      if (mesh.world().rank() == 0) result.losses.push_back(mean.item<double>());
    }
    if (!save.empty()) {
      save_sharded_checkpoint(save, description, state, {to, 0, {}, {}}, mesh.world());
    }
    const auto whole = tiny_gpt::whole_parameters(model, kVocab);
    if (mesh.world().rank() != 0) return;
    for (const GptParameter& p : model.named_parameters())
      result.params.push_back(whole.at(p.name));
  });
  return result;
}

std::string fresh_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("chorus-zero3-ck-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

void expect_continues(const Result& got, const Result& whole, double rtol,
                      const std::string& where) {
  SCOPED_TRACE("resumed at " + where);
  ASSERT_EQ(got.losses.size(), std::size_t(kSteps - kSaveAt));
  for (std::size_t s = 0; s < got.losses.size(); ++s) {
    const double want = whole.losses[kSaveAt + s];
    EXPECT_LE(std::abs(got.losses[s] - want), rtol * std::abs(want)) << "step " << kSaveAt + s;
  }
  ASSERT_EQ(got.params.size(), whole.params.size());
  for (std::size_t i = 0; i < got.params.size(); ++i) {
    if (rtol == 0) {
      EXPECT_TRUE(torch::equal(got.params[i], whole.params[i])) << "parameter " << i;
    } else {
      expect_close(got.params[i], whole.params[i], "parameter " + std::to_string(i), rtol);
    }
  }
}

TEST(Zero3Checkpoint, GptAtDp4ResumesAtOtherDegrees) {
  const Result whole = run(4, 0, kSteps, "", "");
  const std::string ck = fresh_path("gpt.ck");
  run(4, 0, kSaveAt, "", ck);
  expect_continues(run(4, kSaveAt, kSteps, ck, ""), whole, 0, "dp 4");
  for (int ranks : {3, 1}) {
    expect_continues(run(ranks, kSaveAt, kSteps, ck, ""), whole, 1e-10,
                     "dp " + std::to_string(ranks));
  }
}

// One checkpoint kind for every strategy: ZeRO-3's resumes with the parameters whole (DDP) or
// their optimizer state sharded (ZeRO-1), split over tp; DDP's resumes under ZeRO-3.
TEST(Zero3Checkpoint, GptResumesUnderOtherStrategiesAndTheOtherWay) {
  const Result whole = run(4, 0, kSteps, "", "");
  const std::string ck = fresh_path("strategies.ck");
  run(4, 0, kSaveAt, "", ck);
  expect_continues(run_tp2(false, kSaveAt, kSteps, ck, ""), whole, 1e-10, "tp 2 x dp 2, DDP");
  expect_continues(run_tp2(true, kSaveAt, kSteps, ck, ""), whole, 1e-10, "tp 2 x dp 2, ZeRO-1");
  const std::string ddp = fresh_path("ddp.ck");
  const Result first = run_tp2(false, 0, kSaveAt, "", ddp);
  for (int s = 0; s < kSaveAt; ++s) {
    EXPECT_NEAR(first.losses[std::size_t(s)], whole.losses[std::size_t(s)], 1e-10);
  }
  expect_continues(run(4, kSaveAt, kSteps, ddp, ""), whole, 1e-10, "dp 4 from tp 2 x dp 2 DDP");
}

// One process trains 3 steps unsharded; the checkpoint's parameters, read as its own
// gpt_checkpoint_pieces (QKV part-major), equal its parameters in that layout.
TEST(Zero3Checkpoint, GptParametersAreSavedInTheGptLayout) {
  const std::string ck = fresh_path("layout.ck");
  run(3, 0, kSaveAt, "", ck);
  on_ranks(1, [&](const Group& group, int) {
    GptModel model(gpt_config(), Group{group.comm, "tp", nullptr});
    auto opt = adam(model.parameters());
    for (int s = 0; s < kSaveAt; ++s) {
      opt->zero_grad();
      model.loss(tokens(s, 7, 3), tokens(s, 5, 1)).backward();
      opt->step();
    }
    const std::vector<TensorPiece> want = gpt_checkpoint_pieces(model);
    std::vector<TensorPiece> targets = want;
    for (TensorPiece& t : targets) t.data = at::Tensor();
    load_tensor_checkpoint(ck, targets);
    for (std::size_t i = 0; i < want.size(); ++i) {
      expect_close(targets[i].data, want[i].data, want[i].name);
    }
  });
}

TEST(Zero3Checkpoint, AnotherGptIsRefusedBeforeAnythingChanges) {
  const std::string ck = fresh_path("other.ck");
  run(2, 0, 1, "", ck);
  on_ranks(2, [&](const Group& group, int rank) {
    Communicator comm = group.comm;
    const Group tp{comm.split(rank, 0), "tp", nullptr};
    GptModel model(gpt_config(3), tp);
    Zero3 zero(model.parameters(), gpt_units(model), group, adam);
    ShardedState state = gpt_zero3_state(model, zero);
    std::vector<at::Tensor> before;
    for (const at::Tensor& s : zero.parameter_shards()) before.push_back(s.clone());
    try {
      load_sharded_checkpoint(ck, gpt_model_description(model.config()), state);
      ADD_FAILURE() << "a 3-layer GPT loaded a 2-layer GPT's checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("checkpoint " + ck +
                                           " was saved from a model with layers 2, this model "
                                           "has layers 3"),
                std::string::npos)
          << e.what();
    }
    const auto after = zero.parameter_shards();
    for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i]));
  });
}

}  // namespace
}  // namespace chorus::train::zero_test
