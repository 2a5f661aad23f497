// DDP features against single-process references: unused parameters, global-norm clipping,
// replica verification.
#include "ddp_test_util.hpp"

#include <chorus/error.hpp>

namespace chorus::train::testing {
namespace {

/// A trunk and two heads; each rank uses one head, so the other gets no gradient there.
struct TwoHeadsImpl : torch::nn::Module {
  TwoHeadsImpl()
      : trunk(register_module("trunk", torch::nn::Linear(kIn, kHidden))),
        head_a(register_module("head_a", torch::nn::Linear(kHidden, kOut))),
        head_b(register_module("head_b", torch::nn::Linear(kHidden, kOut))) {}
  torch::Tensor forward(const torch::Tensor& x, bool use_a) {
    auto h = torch::tanh(trunk->forward(x));
    return use_a ? head_a->forward(h) : head_b->forward(h);
  }
  torch::nn::Linear trunk, head_a, head_b;
};

std::shared_ptr<TwoHeadsImpl> make_two_heads(std::uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TwoHeadsImpl>();
}

TEST(DdpFeatures, UnusedParametersAreReducedAsZeros) {
  const std::vector<int> sizes{5, 8, 6};
  const Data d = make_data(3, 19, 11);
  // Reference: the global mean loss, each rank's rows through that rank's head.
  auto ref = make_two_heads(3);
  auto ref_opt = make_optimizer(false, ref->parameters());
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    ref_opt->zero_grad();
    torch::Tensor total = torch::zeros({});
    for (int r = 0; r < 3; ++r) {
      auto x = d.x[s].narrow(0, share_begin(sizes, r), sizes[r]);
      auto y = d.y[s].narrow(0, share_begin(sizes, r), sizes[r]);
      total = total + torch::mse_loss(ref->forward(x, r % 2 == 0), y) * sizes[r];
    }
    (total / 19).backward();
    ref_opt->step();
  }
  const auto want = clone_params(*ref);
  std::vector<std::shared_ptr<TwoHeadsImpl>> models{make_two_heads(3), make_two_heads(4),
                                                    make_two_heads(5)};
  run_ranks(3, [&](int rank, chorus::Communicator& comm) {
    auto model = models[static_cast<std::size_t>(rank)];
    DdpOptions o;
    o.find_unused_parameters = true;
    o.first_bucket_bytes = 32;
    o.bucket_cap_bytes = 128;
    DistributedDataParallel ddp(model, comm, o);
    auto opt = make_optimizer(false, model->parameters());
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      opt->zero_grad();
      auto x = d.x[s].narrow(0, share_begin(sizes, rank), sizes[rank]);
      auto y = d.y[s].narrow(0, share_begin(sizes, rank), sizes[rank]);
      ddp.prepare_for_backward(sizes[rank]);
      torch::mse_loss(model->forward(x, rank % 2 == 0), y).backward();
      ddp.finish_gradient_sync();
      opt->step();
    }
    expect_params_near(clone_params(*model), want, 1e-5, "rank " + std::to_string(rank));
  });
}

TEST(DdpFeatures, MissingGradientWithoutFindUnusedIsAnError) {
  auto model = make_two_heads(3);
  run_ranks(1, [&](int, chorus::Communicator& comm) {
    DistributedDataParallel ddp(model, comm);
    ddp.prepare_for_backward(4);
    torch::mse_loss(model->forward(torch::ones({4, kIn}), true), torch::zeros({4, kOut}))
        .backward();
    try {
      ddp.finish_gradient_sync();
      ADD_FAILURE() << "finish_gradient_sync accepted a parameter without gradient";
    } catch (const chorus::Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos);
    }
  });
}

TEST(DdpFeatures, ClipGradNormMatchesSingleProcess) {
  const std::vector<int> sizes{4, 9, 7};
  const Data d = make_data(3, 20, 21);
  auto ref = make_mlp(17);
  auto ref_opt = make_optimizer(false, ref->parameters());
  std::vector<double> ref_norms;
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    ref_opt->zero_grad();
    torch::mse_loss(ref->forward(d.x[s]), d.y[s]).backward();
    ref_norms.push_back(torch::nn::utils::clip_grad_norm_(ref->parameters(), 0.05));
    ref_opt->step();
  }
  const auto want = clone_params(*ref);
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models{make_mlp(17), make_mlp(1),
                                                                 make_mlp(2)};
  run_ranks(3, [&](int rank, chorus::Communicator& comm) {
    auto model = models[static_cast<std::size_t>(rank)];
    DistributedDataParallel ddp(model, comm);
    auto opt = make_optimizer(false, model->parameters());
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      double norm = 0;
      mlp_step(ddp, *model, *opt, d, s, share_begin(sizes, rank), sizes[rank], 0.05, &norm);
      EXPECT_NEAR(norm, ref_norms[s], 1e-5 * ref_norms[s]) << "step " << s;
      EXPECT_GT(norm, 0.05) << "the test should clip";
    }
    expect_params_near(clone_params(*model), want, 1e-5, "rank " + std::to_string(rank));
  });
}

TEST(DdpFeatures, VerifyReplicasDetectsDrift) {
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models{make_mlp(1), make_mlp(2)};
  run_ranks(2, [&](int rank, chorus::Communicator& comm) {
    DistributedDataParallel ddp(models[static_cast<std::size_t>(rank)], comm);
    EXPECT_TRUE(ddp.verify_replicas());  // construction broadcast rank 0's parameters
    if (rank == 1) {
      torch::NoGradGuard no_grad;
      models[1]->parameters()[2].view(-1)[3] += 1e-6;
    }
    EXPECT_FALSE(ddp.verify_replicas());
  });
}

}  // namespace
}  // namespace chorus::train::testing
