// Checkpoint refusals: tensors of another shape, tensors the model lacks or does not have, an
// optimizer of another type, a run of another configuration (on every rank, before anything
// is loaded), a path that cannot be written (before training), and one-line save failures.
#include "checkpoint_test_util.hpp"
#include "ddp_test_util.hpp"

#include <chorus/error.hpp>

#include <filesystem>

namespace chorus::train::testing {
namespace {

namespace fs = std::filesystem;

using chorus::testing::TempDir;

/// Saves `model` with SGD and `config` from one rank.
void save_one_rank(const std::string& path, torch::nn::Module& model, bool adam,
                   const RunConfig& config = {}) {
  auto opt = make_optimizer(adam, model.parameters());
  run_ranks(1, [&](int, chorus::Communicator& comm) {
    save_checkpoint(path, model, *opt, TrainingState{7, 0, {}, config}, comm);
  });
}

/// The InvalidArgument sentence `action` throws.
template <class Action>
std::string refusal(Action&& action) {
  return chorus::testing::error_of(Status::InvalidArgument, action);
}

TEST(Checkpoint, LoadRefusesATensorOfAnotherShapeAndChangesNothing) {
  TempDir dir("shape");
  const std::string path = dir.file("ck.pt");
  auto saved = make_mlp(1, 10);
  save_one_rank(path, *saved, false);
  auto model = make_mlp(2, 8);
  const auto before = clone_params(*model);
  auto opt = make_optimizer(false, model->parameters());
  const std::string message = refusal([&] { load_checkpoint(path, *model, *opt); });
  EXPECT_NE(message.find("holds 0.weight with shape [10, 6], the model's 0.weight has shape "
                         "[8, 6]"),
            std::string::npos)
      << message;
  expect_params_near(clone_params(*model), before, 0.0, "after the refusal");
}

TEST(Checkpoint, LoadRefusesTensorsTheModelLacksOrDoesNotHave) {
  TempDir dir("names");
  const std::string path = dir.file("ck.pt");
  torch::manual_seed(3);
  auto three = std::make_shared<torch::nn::SequentialImpl>(
      torch::nn::Linear(kIn, kHidden), torch::nn::Tanh(), torch::nn::Linear(kHidden, kHidden));
  save_one_rank(path, *three, false);
  auto five = make_mlp(4);
  auto opt_five = make_optimizer(false, five->parameters());
  const std::string missing = refusal([&] { load_checkpoint(path, *five, *opt_five); });
  EXPECT_NE(missing.find("has no module 3"), std::string::npos) << missing;

  save_one_rank(path, *five, false);
  auto opt_three = make_optimizer(false, three->parameters());
  const std::string extra = refusal([&] { load_checkpoint(path, *three, *opt_three); });
  EXPECT_NE(extra.find("holds 3, which the model does not have"), std::string::npos) << extra;
}

TEST(Checkpoint, LoadRefusesAnotherOptimizerType) {
  TempDir dir("optimizer");
  const std::string path = dir.file("ck.pt");
  auto model = make_mlp(1);
  save_one_rank(path, *model, false);
  auto adam = make_optimizer(true, model->parameters());
  const std::string message = refusal([&] { load_checkpoint(path, *model, *adam); });
  EXPECT_NE(message.find("holds the state of a SGD optimizer, the given optimizer is Adam"),
            std::string::npos)
      << message;
}

TEST(Checkpoint, ConfigIsSavedAndDifferencesAreNamed) {
  TempDir dir("config");
  const std::string path = dir.file("ck.pt");
  const RunConfig config{{"--hidden", "128"}, {"world size", "2"}, {"odd.key", "a b"}};
  auto model = make_mlp(1);
  save_one_rank(path, *model, false, config);
  EXPECT_EQ(read_checkpoint_state(path).config, config);
  EXPECT_EQ(read_checkpoint_state(path).step, 7);

  EXPECT_EQ(config_difference("c.pt", config, config), "");
  EXPECT_EQ(config_difference("c.pt", {}, config),
            "checkpoint c.pt records no settings to compare with this run's (it was written "
            "without them)");
  RunConfig other = config;
  other["--hidden"] = "64";
  EXPECT_EQ(config_difference("c.pt", config, other),
            "checkpoint c.pt was made with --hidden 128, this run has --hidden 64");
  other["world size"] = "3";
  other["--optimizer"] = "adam";
  EXPECT_EQ(config_difference("c.pt", config, other),
            "checkpoint c.pt was made with --hidden 128, --optimizer (not recorded) and world "
            "size 2, this run has --hidden 64, --optimizer adam and world size 3");
}

TEST(Checkpoint, ResumeRefusesAnotherConfigOnEveryRankBeforeLoading) {
  TempDir dir("resume");
  const std::string path = dir.file("ck.pt");
  const RunConfig config{{"--hidden", "10"}, {"world size", "2"}};
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> saved{make_mlp(1), make_mlp(1)};
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> fresh{make_mlp(2), make_mlp(2)};
  std::vector<std::string> messages(2);
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    auto& model = *fresh[static_cast<std::size_t>(rank)];
    auto opt = make_optimizer(false, model.parameters());
    EXPECT_FALSE(resume_checkpoint(path, model, *opt, config, comm).has_value());  // no file
    auto save_opt = make_optimizer(false, saved[static_cast<std::size_t>(rank)]->parameters());
    save_checkpoint(path, *saved[static_cast<std::size_t>(rank)], *save_opt,
                    TrainingState{5, 0, {}, config}, comm);
    const auto before = clone_params(model);
    RunConfig other = config;
    other["world size"] = "3";
    messages[static_cast<std::size_t>(rank)] =
        refusal([&] { resume_checkpoint(path, model, *opt, other, comm); });
    expect_params_near(clone_params(model), before, 0.0, "after the refusal");
    const auto state = resume_checkpoint(path, model, *opt, config, comm);
    ASSERT_TRUE(state.has_value());
    EXPECT_EQ(state->step, 5);
    expect_params_near(clone_params(model), clone_params(*saved[0]), 0.0, "after the resume");
  });
  for (const auto& message : messages) {
    EXPECT_EQ(message,
              "checkpoint " + path + " was made with world size 2, this run has world size 3");
  }
}

TEST(Checkpoint, PathIsCheckedOnRankZeroAndEveryRankFails) {
  TempDir dir("path");
  std::vector<std::string> missing(2), directory(2);
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    const auto r = static_cast<std::size_t>(rank);
    missing[r] = refusal([&] { check_checkpoint_path(dir.file("none/ck.pt"), comm); });
    directory[r] = refusal([&] { check_checkpoint_path(dir.file(""), comm); });
    check_checkpoint_path(dir.file("ck.pt"), comm);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(missing[r], "checkpoint " + dir.file("none/ck.pt") +
                              " cannot be written: directory " + dir.file("none") +
                              " does not exist");
    EXPECT_NE(directory[r].find("is a directory"), std::string::npos) << directory[r];
  }
  EXPECT_FALSE(fs::exists(dir.file("ck.pt.tmp")));  // the probe file is gone
  EXPECT_FALSE(fs::exists(dir.file("ck.pt")));
}

TEST(Checkpoint, SaveFailureIsOneLineOnEveryRank) {
  std::vector<std::string> messages(2);
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models{make_mlp(1), make_mlp(1)};
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    auto& model = *models[static_cast<std::size_t>(rank)];
    auto opt = make_optimizer(false, model.parameters());
    try {
      save_checkpoint("/nonexistent/chorus/ck.pt", model, *opt, TrainingState{}, comm);
      ADD_FAILURE() << "saved to /nonexistent";
    } catch (const chorus::Error& e) {
      messages[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_NE(messages[0].find("save_checkpoint(/nonexistent/chorus/ck.pt) failed on rank 0: "),
            std::string::npos)
      << messages[0];
  EXPECT_EQ(messages[0].find('\n'), std::string::npos) << messages[0];
}

}  // namespace
}  // namespace chorus::train::testing
