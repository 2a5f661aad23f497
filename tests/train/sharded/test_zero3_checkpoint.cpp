// ZeRO-3 checkpoints of the GPT model (gpt_zero3_state), threads as ranks, fp64, Adam: a run at
// dp 4 saved after 3 steps resumes at dp 4 bit-equal to the uninterrupted run and at dp 3 and
// one rank within 1e-10 of it; the saved parameters are the GPT checkpoint layout (the
// unsharded QKV order: one process's gpt_checkpoint_pieces read them back equal to its own
// after 3 steps); a checkpoint of another GPT is refused, naming what differs, before anything
// changes.
#include "zero3_test_util.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/sharded_checkpoint.hpp>

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

std::string fresh_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("chorus-zero3-ck-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

void expect_continues(const Result& got, const Result& whole, double rtol, int ranks) {
  SCOPED_TRACE("resumed at dp " + std::to_string(ranks));
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
  expect_continues(run(4, kSaveAt, kSteps, ck, ""), whole, 0, 4);
  for (int ranks : {3, 1})
    expect_continues(run(ranks, kSaveAt, kSteps, ck, ""), whole, 1e-10, ranks);
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
