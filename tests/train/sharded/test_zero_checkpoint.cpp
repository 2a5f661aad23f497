// Sharded checkpoints (sharded_checkpoint.hpp), threads as ranks, fp64: a ZeRO-2 and a ZeRO-3
// run at dp 4 saved after 3 steps and resumed at dp 4 under the same stage (bit-equal to the
// uninterrupted run), and at dp 2 ZeRO-1, dp 3 DDP, one rank and the other stages (within 1e-10
// of it: other summation orders), with SGD-momentum, Adam and AdamW; a DDP checkpoint resumed
// by ZeRO-1/2/3; every refused checkpoint
// (missing, truncated or corrupt data file, missing index, another model, another optimizer,
// a torch-archive checkpoint) refused with its sentence before anything changes.
#include "zero3_test_util.hpp"

#include <chorus/train/sharded_checkpoint.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace chorus::train::zero_test {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 6;
constexpr int kSaveAt = 3;
constexpr int kBatch = 12;  ///< global rows per step: divisible by 1, 2, 3 and 4
constexpr std::uint64_t kSeed = 7;

/// stage 0: data parallelism with replicated state (the gradient reducer all-reducing, as
/// DDP does, in fp64; no reducer on one rank).
struct Strategy {
  int dp = 1;
  int stage = 0;  ///< 3: ZeRO-3 with a unit per Linear layer
  std::string name() const {
    return (stage == 0 ? std::string(dp == 1 ? "one rank" : "DDP")
                       : "ZeRO-" + std::to_string(stage)) +
           " at dp " + std::to_string(dp);
  }
};

/// What rank 0 saw: the global loss of each step taken, and the final parameters.
struct Result {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
};

/// Trains steps [from, to) of `d` under `st` with optimizer `o`.
Result run(const Strategy& st, Opt o, const Data& d, const Segment& seg) {
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
  for (int r = 0; r < st.dp; ++r) models.push_back(make_mlp(kSeed, at::kDouble));
  Result result;
  on_ranks(st.dp, [&](const Group& group, int rank) {
    auto model = models[std::size_t(rank)];
    std::unique_ptr<ZeroOptimizer> zero;
    std::unique_ptr<Zero3> zero3;
    std::unique_ptr<torch::optim::Optimizer> opt;
    std::unique_ptr<GradientReducer> ddp;
    ShardedState state;
    if (st.stage == 3) {
      zero3 = std::make_unique<Zero3>(model->parameters(), kMlpUnits, group, factory(o));
      state = zero3_state(*zero3, module_parameter_pieces(*model));
    } else if (st.stage > 0) {
      zero = std::make_unique<ZeroOptimizer>(model->parameters(), group, factory(o),
                                             small_buckets(st.stage));
      state = zero_state(*zero, module_parameter_pieces(*model));
    } else {
      opt = make_optimizer(o, model->parameters());
      state = replicated_state(*opt, module_parameter_pieces(*model), group);
      if (st.dp > 1) ddp = std::make_unique<GradientReducer>(model->parameters(), group);
    }
    if (!seg.load.empty()) {
      EXPECT_EQ(load_sharded_checkpoint(seg.load, *model, state).step, seg.from);
    }
    const std::int64_t count = kBatch / st.dp;
    for (int s = seg.from; s < seg.to; ++s) {
      const auto x = d.x[std::size_t(s)].narrow(0, count * rank, count);
      const auto y = d.y[std::size_t(s)].narrow(0, count * rank, count);
      if (zero3) {
        zero3->zero_grad();
        zero3->begin_weighted_step(count, count);
      } else if (zero) {
        zero->zero_grad();
        zero->begin_weighted_step(count, count);
      } else {
        opt->zero_grad();
        if (ddp) ddp->begin_weighted_step(count, count);
      }
      auto loss =
          torch::mse_loss(zero3 ? sharded_mlp_forward(*zero3, *model, x) : model->forward(x), y);
      loss.backward();
      if (zero3) {
        zero3->finish_step();
        zero3->step();
      } else if (zero) {
        zero->finish_step();
        zero->step();
      } else {
        if (ddp) ddp->finish_step();
        opt->step();
      }
      double global[1] = {loss.item<double>() / st.dp};
      Communicator comm = group.comm;
      comm.all_reduce(global, global, 1, DataType::Float64, ReduceOp::Sum);
      if (rank == 0) result.losses.push_back(global[0]);
    }
    if (!seg.save.empty()) {
      save_sharded_checkpoint(seg.save, *model, state, TrainingState{seg.to, 0, {}, {}},
                              group.comm);
    }
    const std::vector<at::Tensor> params = zero3 ? zero3->full_parameters() : clone_params(*model);
    if (rank == 0) result.params = params;
  });
  return result;
}

std::string fresh_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("chorus-zero-ck-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

/// The data files of the checkpoint at `path`.
std::vector<std::string> data_files(const std::string& path) {
  std::vector<std::string> out;
  const fs::path p(path);
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind(p.filename().string() + ".", 0) == 0 && name.find(".rank") != std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_results(const Result& got, const Result& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.losses.size(), std::size_t(kSteps - kSaveAt)) << what;
  for (std::size_t s = 0; s < got.losses.size(); ++s) {
    const double w = want.losses[kSaveAt + s];
    EXPECT_LE(std::abs(got.losses[s] - w), rtol * std::max(std::abs(w), 1e-3))
        << what << ": loss of step " << kSaveAt + s;
  }
  ASSERT_EQ(got.params.size(), want.params.size());
  for (std::size_t i = 0; i < got.params.size(); ++i) {
    if (rtol == 0) {
      EXPECT_TRUE(torch::equal(got.params[i], want.params[i])) << what << ": parameter " << i;
    } else {
      expect_close(got.params[i], want.params[i], what + ": parameter " + std::to_string(i), rtol);
    }
  }
}

class Reshard : public ::testing::TestWithParam<Opt> {};

/// Saves a run of `saver` at kSaveAt and resumes it under itself (bit-equal to the
/// uninterrupted run) and under each of `others` (1e-10: other summation orders).
void expect_resharded(const Strategy& saver, Opt o, const std::vector<Strategy>& others) {
  const Data d = make_data(kSteps, kBatch, at::kDouble);
  const Result whole = run(saver, o, d, {0, kSteps, "", ""});
  const std::string ck = fresh_path("reshard-" + std::to_string(saver.stage) + name(o) + ".ck");
  run(saver, o, d, {0, kSaveAt, "", ck});
  // dp 4 held each parameter and moment in four Flat pieces, one data file per rank.
  EXPECT_EQ(data_files(ck).size(), 4u);
  expect_results(run(saver, o, d, {kSaveAt, kSteps, ck, ""}), whole, 0, saver.name());
  for (const Strategy& st : others) {
    expect_results(run(st, o, d, {kSaveAt, kSteps, ck, ""}), whole, 1e-10, st.name());
  }
}

TEST_P(Reshard, Zero2AtDp4ResumesUnderEveryStrategy) {
  expect_resharded(
      {4, 2}, GetParam(),
      {Strategy{2, 1}, Strategy{3, 0}, Strategy{1, 0}, Strategy{3, 2}, Strategy{3, 3}});
}

TEST_P(Reshard, Zero3AtDp4ResumesUnderEveryStrategy) {
  expect_resharded(
      {4, 3}, GetParam(),
      {Strategy{2, 1}, Strategy{3, 0}, Strategy{1, 0}, Strategy{3, 3}, Strategy{2, 2}});
}

TEST_P(Reshard, DdpCheckpointResumesUnderZero) {
  const Opt o = GetParam();
  const Data d = make_data(kSteps, kBatch, at::kDouble);
  const Result whole = run({3, 0}, o, d, {0, kSteps, "", ""});
  const std::string ck = fresh_path("ddp-" + name(o) + ".ck");
  run({3, 0}, o, d, {0, kSaveAt, "", ck});
  EXPECT_EQ(data_files(ck).size(), 1u);  // replicated: rank 0 writes everything once
  expect_results(run({4, 2}, o, d, {kSaveAt, kSteps, ck, ""}), whole, 1e-10, "ZeRO-2 at dp 4");
  expect_results(run({2, 1}, o, d, {kSaveAt, kSteps, ck, ""}), whole, 1e-10, "ZeRO-1 at dp 2");
  expect_results(run({4, 3}, o, d, {kSaveAt, kSteps, ck, ""}), whole, 1e-10, "ZeRO-3 at dp 4");
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Reshard,
                         ::testing::Values(Opt::SgdMomentum, Opt::Adam, Opt::AdamW),
                         [](const auto& info) {
                           std::string n = name(info.param);
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

/// One rank's model and Adam after one step, to load refused checkpoints into.
struct Target {
  std::shared_ptr<torch::nn::SequentialImpl> model = make_mlp(123, at::kDouble);
  std::unique_ptr<torch::optim::Optimizer> opt = make_optimizer(Opt::Adam, model->parameters());
  ShardedState state;
  Target() {
    opt->zero_grad();
    model->forward(torch::ones({2, kIn}, at::kDouble)).sum().backward();
    opt->step();
    chorus::testing::ThreadJob job(1);
    job.run([&](Communicator& comm) {
      state = replicated_state(*opt, module_parameter_pieces(*model), Group{comm, "dp", nullptr});
    });
  }
  /// Every parameter and moment (to show a refused load changed nothing).
  std::vector<at::Tensor> snapshot() const {
    std::vector<at::Tensor> out = clone_params(*model);
    for (const auto& [key, s] : opt->state()) {
      const auto& adam = static_cast<const torch::optim::AdamParamState&>(*s);
      out.push_back(adam.exp_avg().clone());
      out.push_back(torch::scalar_tensor(adam.step()));
    }
    return out;
  }
};

void expect_refused(const std::string& ck, const std::string& sentence, Target& t) {
  const auto before = t.snapshot();
  try {
    load_sharded_checkpoint(ck, *t.model, t.state);
    ADD_FAILURE() << "loaded " << ck << ", expected: " << sentence;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(sentence), std::string::npos) << e.what();
  }
  const auto after = t.snapshot();
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i]));
}

TEST(ShardedCheckpoint, RefusesBrokenCheckpointsBeforeChangingAnything) {
  const Data d = make_data(kSteps, kBatch, at::kDouble);
  const std::string ck = fresh_path("saved.ck");
  run({4, 2}, Opt::Adam, d, {0, 2, "", ck});
  Target t;
  {  // the checkpoint fits the target
    Target fits;
    EXPECT_EQ(load_sharded_checkpoint(ck, *fits.model, fits.state).step, 2);
  }
  const auto broken = [&](const std::string& what) {  // a checkpoint of its own to break
    const std::string path = fresh_path(what + ".ck");
    run({4, 2}, Opt::Adam, d, {0, 2, "", path});
    return std::pair{path, data_files(path)};
  };
  {
    auto [path, files] = broken("missing");
    fs::remove(files[2]);
    expect_refused(path, "cannot open data file " + files[2], t);
  }
  {
    auto [path, files] = broken("truncated");
    const auto size = fs::file_size(files[1]);
    fs::resize_file(files[1], size - 8);
    expect_refused(path,
                   "data file " + files[1] + " is " + std::to_string(size - 8) +
                       " bytes, the index records " + std::to_string(size) +
                       " (truncated or replaced)",
                   t);
  }
  {
    auto [path, files] = broken("corrupt");
    std::fstream f(files[3], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x7f');
    f.close();
    expect_refused(path, "of data file " + files[3] + " fail their checksum (corrupt)", t);
  }
  {
    auto [path, files] = broken("noindex");
    fs::remove(path);  // a save that never reached its index: no checkpoint
    expect_refused(path, "cannot read checkpoint " + path, t);
  }
  {  // another model: a hidden layer of another width
    Target other;
    torch::manual_seed(1);
    auto wide = std::make_shared<torch::nn::SequentialImpl>(
        torch::nn::Linear(kIn, kHidden + 1), torch::nn::Tanh(),
        torch::nn::Linear(kHidden + 1, kHidden), torch::nn::Tanh(),
        torch::nn::Linear(kHidden, kOut));
    wide->to(at::kDouble);
    other.model = wide;
    other.opt = make_optimizer(Opt::Adam, wide->parameters());
    chorus::testing::ThreadJob job(1);
    job.run([&](Communicator& comm) {
      other.state =
          replicated_state(*other.opt, module_parameter_pieces(*wide), Group{comm, "dp", nullptr});
    });
    expect_refused(ck,
                   "checkpoint " + ck +
                       " holds 0.weight with shape [10, 6], the model's "
                       "0.weight has shape [11, 6]",
                   other);
  }
  {  // another optimizer
    Target sgd;
    sgd.opt = make_optimizer(Opt::SgdMomentum, sgd.model->parameters());
    chorus::testing::ThreadJob job(1);
    job.run([&](Communicator& comm) {
      sgd.state = replicated_state(*sgd.opt, module_parameter_pieces(*sgd.model),
                                   Group{comm, "dp", nullptr});
    });
    try {
      load_sharded_checkpoint(ck, *sgd.model, sgd.state);
      ADD_FAILURE() << "an SGD optimizer loaded Adam's state";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("Adam"), std::string::npos) << e.what();
    }
  }
  {  // save_checkpoint's format (the optimizer as one torch archive)
    const std::string archive = fresh_path("archive.ck");
    chorus::testing::ThreadJob job(1);
    job.run([&](Communicator& comm) { save_checkpoint(archive, *t.model, *t.opt, {}, comm); });
    expect_refused(archive, "holds the optimizer's state as one torch archive", t);
  }
}

}  // namespace
}  // namespace chorus::train::zero_test
