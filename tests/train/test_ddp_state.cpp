// DDP state over time: local SGD against independently simulated replicas, statistics and
// bucket layout, and checkpoint save -> load -> continue reproducing an uninterrupted run.
#include "ddp_test_util.hpp"

#include <chorus/error.hpp>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <map>

namespace chorus::train::testing {
namespace {

TEST(DdpState, LocalSgdAveragesParametersEveryNSteps) {
  const std::vector<int> sizes{6, 10};
  const Data d = make_data(4, 16, 31);
  // Reference: two independent replicas from the same start, parameters averaged by hand.
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> ref{make_mlp(8), make_mlp(8)};
  std::vector<std::unique_ptr<torch::optim::Optimizer>> ref_opt;
  for (auto& m : ref) ref_opt.push_back(make_optimizer(false, m->parameters()));
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    for (int r = 0; r < 2; ++r) {
      ref_opt[r]->zero_grad();
      auto x = d.x[s].narrow(0, share_begin(sizes, r), sizes[r]);
      auto y = d.y[s].narrow(0, share_begin(sizes, r), sizes[r]);
      torch::mse_loss(ref[r]->forward(x), y).backward();
      ref_opt[r]->step();
    }
    if (s % 2 == 1) {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < ref[0]->parameters().size(); ++i) {
        auto mean = (ref[0]->parameters()[i] + ref[1]->parameters()[i]) / 2;
        ref[0]->parameters()[i].copy_(mean);
        ref[1]->parameters()[i].copy_(mean);
      }
    }
  }
  const auto want = clone_params(*ref[0]);
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models{make_mlp(8), make_mlp(9)};
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    auto model = models[static_cast<std::size_t>(rank)];
    DdpOptions o;
    o.average_parameters_every = 2;
    DistributedDataParallel ddp(model, comm, o);
    auto opt = make_optimizer(false, model->parameters());
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      mlp_step(ddp, *model, *opt, d, s, share_begin(sizes, rank), sizes[rank]);
      EXPECT_EQ(ddp.verify_replicas(), s % 2 == 1) << "step " << s;
    }
    expect_params_near(clone_params(*model), want, 1e-5, "rank " + std::to_string(rank));
    EXPECT_EQ(ddp.stats().bytes_reduced, 0);  // no gradient traffic in local SGD
  });
}

TEST(DdpState, StatsAndBucketLayout) {
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models{make_mlp(1), make_mlp(2)};
  const Data d = make_data(2, 8, 41);
  for (auto compression : {GradCompression::None, GradCompression::Bf16}) {
    run_ranks(2, [&](int rank, chorus::Communicator& comm) {
      auto model = models[static_cast<std::size_t>(rank)];
      DdpOptions o;
      o.first_bucket_bytes = 100;
      o.bucket_cap_bytes = 400;
      o.compression = compression;
      DistributedDataParallel ddp(model, comm, o);
      std::vector<std::size_t> bytes;
      std::int64_t total = 0;
      for (const auto& p : model->parameters()) {
        bytes.push_back(static_cast<std::size_t>(p.numel()) * 4);
        total += p.numel();
      }
      EXPECT_EQ(ddp.bucket_assignment(), assign_buckets(bytes, 100, 400));
      EXPECT_GT(ddp.bucket_assignment().size(), 2u);
      auto opt = make_optimizer(false, model->parameters());
      for (std::size_t s = 0; s < 2; ++s) mlp_step(ddp, *model, *opt, d, s, rank * 4, 4);
      const auto st = ddp.stats();
      EXPECT_EQ(st.steps, 2);
      const std::int64_t wire = compression == GradCompression::None ? 4 : 2;
      EXPECT_EQ(st.bytes_reduced, 2 * total * wire);
      EXPECT_GT(st.seconds_in_backward, 0.0);
      EXPECT_GE(st.seconds_communicating_exposed, 0.0);
    });
  }
}

/// Trains steps [from, to) on this rank's 5 rows, appending its local losses.
void train(DistributedDataParallel& ddp, torch::nn::SequentialImpl& model,
           torch::optim::Optimizer& opt, const Data& d, std::size_t from, std::size_t to, int rank,
           std::vector<double>& losses) {
  for (std::size_t s = from; s < to; ++s)
    losses.push_back(mlp_step(ddp, model, opt, d, s, rank * 5, 5));
}

TEST(DdpState, CheckpointResumeContinuesTheSameLossCurve) {
  const Data d = make_data(6, 10, 51);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_ddp_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "ck.pt").string();
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> straight_models{make_mlp(5), make_mlp(6)};
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> first{make_mlp(5), make_mlp(6)};
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> resumed{make_mlp(70), make_mlp(71)};
  std::vector<std::vector<double>> straight(2), interrupted(2);
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    // Uninterrupted: six steps.
    auto ref = straight_models[static_cast<std::size_t>(rank)];
    {
      DistributedDataParallel ddp(ref, comm);
      auto opt = make_optimizer(true, ref->parameters());
      train(ddp, *ref, *opt, d, 0, 6, rank, straight[rank]);
    }
    // Three steps, checkpoint, then fresh model and optimizer loaded from it, three more.
    auto model = first[static_cast<std::size_t>(rank)];
    {
      DistributedDataParallel ddp(model, comm);
      auto opt = make_optimizer(true, model->parameters());
      train(ddp, *model, *opt, d, 0, 3, rank, interrupted[rank]);
      TrainingState state{3, 1, {{"sampler.position", 42}, {"x", -5}}, {}};
      save_checkpoint(path, *model, *opt, state, comm);
    }
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    auto fresh = resumed[static_cast<std::size_t>(rank)];
    auto opt = make_optimizer(true, fresh->parameters());
    const TrainingState state = load_checkpoint(path, *fresh, *opt);
    EXPECT_EQ(state.step, 3);
    EXPECT_EQ(state.epoch, 1);
    EXPECT_EQ(state.extra,
              (std::map<std::string, std::int64_t>{{"sampler.position", 42}, {"x", -5}}));
    DistributedDataParallel ddp(fresh, comm);
    train(ddp, *fresh, *opt, d, 3, 6, rank, interrupted[rank]);
  });
  std::filesystem::remove_all(dir);  // the index and its data file
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(straight[r].size(), 6u);
    ASSERT_EQ(interrupted[r].size(), 6u);
    for (std::size_t s = 0; s < 6; ++s)
      EXPECT_NEAR(interrupted[r][s], straight[r][s], 1e-6) << "step " << s;
  }
}

TEST(DdpState, LoadingAMissingCheckpointThrows) {
  auto model = make_mlp(1);
  auto opt = make_optimizer(true, model->parameters());
  EXPECT_THROW(load_checkpoint("/nonexistent/chorus.pt", *model, *opt), chorus::Error);
}

}  // namespace
}  // namespace chorus::train::testing
