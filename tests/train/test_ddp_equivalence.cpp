// Equivalence: N-rank DDP over a global batch reaches the same parameters as one process
// training on the whole batch (N = 1..4, equal and unequal shares, SGD and Adam, gradient
// accumulation, compression, unused parameters).
#include "ddp_test_util.hpp"

#include <chorus/error.hpp>

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

namespace chorus::train::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kInitSeed = 7;
constexpr int kSteps = 4;

struct RunConfig {
  std::vector<int> sizes;  ///< rows of each global batch per rank
  bool adam = false;
  int micro = 1;  ///< micro-batches per step (the first micro - 1 inside no_sync)
  /// Before odd steps, free every param.grad (like zero_grad(set_to_none)); before other
  /// steps after the first, replace it with a fresh tensor: DDP's grads alias its buckets
  /// after a step, and both must still give the same training.
  bool replace_grads = false;
  DdpOptions options = small_buckets();
  int hidden = kHidden;
  /// When set: the algorithm every rank's last all-reduce of each step must have run.
  std::string algorithm = {};
  /// When set: runs on every rank right before its DDP is made.
  std::function<void(int rank)> before_ddp = {};
  /// When set: runs on every rank before each step.
  std::function<void(int rank)> before_step = {};
  /// Between prepare_for_backward and backward, as a longer forward pass would take: the
  /// step's sample total then arrives before the gradient hooks run.
  std::chrono::milliseconds forward_pause{0};
  /// When set: checked on every rank's DDP statistics after the last step.
  std::function<void(const DistributedDataParallel::Stats&)> check_stats = {};

  static DdpOptions small_buckets() {
    DdpOptions o;  // several buckets even for this small model: exercises launch ordering
    o.first_bucket_bytes = 64;
    o.bucket_cap_bytes = 300;
    return o;
  }
};

/// One rank's step: its rows of the global batch, split into micro-batches.
void rank_step(DistributedDataParallel& ddp, torch::nn::SequentialImpl& seq,
               torch::optim::Optimizer& opt, const torch::Tensor& x, const torch::Tensor& y,
               int micro, int replace, std::chrono::milliseconds forward_pause) {
  for (auto& p : seq.parameters()) {
    if (replace == 1) p.mutable_grad() = torch::Tensor();
    if (replace == 2 && p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  opt.zero_grad();
  if (x.size(0) == 0) {
    ddp.prepare_for_backward(0);
  } else {
    auto xs = x.chunk(micro);
    auto ys = y.chunk(micro);
    for (std::size_t k = 0; k + 1 < xs.size(); ++k) {
      auto guard = ddp.no_sync();
      ddp.prepare_for_backward(xs[k].size(0));
      torch::mse_loss(seq.forward(xs[k]), ys[k]).backward();
    }
    ddp.prepare_for_backward(xs.back().size(0));
    auto loss = torch::mse_loss(seq.forward(xs.back()), ys.back());
    std::this_thread::sleep_for(forward_pause);
    loss.backward();
  }
  ddp.finish_gradient_sync();
  opt.step();
  ddp.after_optimizer_step();
}

/// Trains every rank (rank r starts from a different seed; DDP broadcasts rank 0's, which uses
/// the reference's seed) and returns each rank's final parameters.
std::vector<std::vector<torch::Tensor>> ddp_training(const Data& d, const RunConfig& c) {
  const int n = static_cast<int>(c.sizes.size());
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
  for (int r = 0; r < n; ++r) models.push_back(make_mlp(r == 0 ? kInitSeed : 1000 + r, c.hidden));
  std::vector<std::vector<torch::Tensor>> result(static_cast<std::size_t>(n));
  run_ranks(n, [&](int rank, chorus::Communicator& comm) {
    auto model = models[static_cast<std::size_t>(rank)];
    if (c.before_ddp) c.before_ddp(rank);
    DistributedDataParallel ddp(model, comm, c.options);
    auto opt = make_optimizer(c.adam, model->parameters());
    const auto first = share_begin(c.sizes, rank);
    const auto count = c.sizes[static_cast<std::size_t>(rank)];
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      const int replace = !c.replace_grads || s == 0 ? 0 : s % 2 == 1 ? 1 : 2;
      if (c.before_step) c.before_step(rank);
      rank_step(ddp, *model, *opt, d.x[s].narrow(0, first, count), d.y[s].narrow(0, first, count),
                c.micro, replace, c.forward_pause);
      if (!c.algorithm.empty()) {
        EXPECT_EQ(comm.last_algorithm(), c.algorithm) << "step " << s;
      }
    }
    EXPECT_TRUE(ddp.verify_replicas());
    if (c.check_stats) c.check_stats(ddp.stats());
    result[static_cast<std::size_t>(rank)] = clone_params(*model);
  });
  return result;
}

void expect_equivalent(const RunConfig& c, double atol) {
  int batch = 0;
  for (int s : c.sizes) batch += s;
  const Data d = make_data(kSteps, batch, 99);
  const auto want = reference_training(d, c.adam, kInitSeed, c.hidden);
  const auto got = ddp_training(d, c);
  for (std::size_t r = 0; r < got.size(); ++r) {
    expect_params_near(got[r], want, atol,
                       "rank " + std::to_string(r) + " of " + std::to_string(got.size()));
  }
}

TEST(DdpEquivalence, EqualSharesSgdOneToFourRanks) {
  expect_equivalent({{24}}, 1e-5);
  expect_equivalent({{12, 12}}, 1e-5);
  expect_equivalent({{8, 8, 8}}, 1e-5);
  expect_equivalent({{6, 6, 6, 6}}, 1e-5);
}

// Buckets launched from the hooks (overlapping backward) or all from finish_gradient_sync():
// the same training either way, and the statistics say which happened. (Hooks launch once the
// step's sample total is known: the pause lets it arrive before backward, as a real forward
// pass does.)
TEST(DdpEquivalence, OverlapWithBackwardOrNot) {
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    RunConfig c{{7, 9, 8}};
    c.options.overlap_backward = overlap;
    c.forward_pause = 20ms;
    c.check_stats = [overlap](const DistributedDataParallel::Stats& stats) {
      if (overlap) {
        EXPECT_GT(stats.buckets_launched_in_backward, 0);
      } else {
        EXPECT_EQ(stats.buckets_launched_in_backward, 0);
      }
    };
    expect_equivalent(c, 1e-5);
    c.sizes = {12, 12};
    c.micro = 2;
    expect_equivalent(c, 1e-5);
  }
}

TEST(DdpEquivalence, FreedOrReplacedGradientsBetweenSteps) {
  RunConfig c{{5, 7}};
  c.replace_grads = true;
  expect_equivalent(c, 1e-5);
  c.micro = 2;
  expect_equivalent(c, 1e-5);
}

TEST(DdpEquivalence, UnequalSharesAreWeightedBySamples) {
  expect_equivalent({{5, 19}}, 1e-5);
  expect_equivalent({{3, 14, 7}}, 1e-5);
  expect_equivalent({{10, 0, 6, 8}}, 1e-5);  // a rank with no samples contributes nothing
}

// The last rank starts every step late: the others' gradient hooks run before the step's
// sample total is known, leave their gradients unscaled and launch no bucket; the buckets go
// once the total arrives (a later hook, or finish), scaled first when the shares are unequal.
TEST(DdpEquivalence, HooksBeforeTheSampleTotalIsKnown) {
  for (const bool replace : {false, true}) {
    SCOPED_TRACE(replace ? "replaced gradients" : "gradients alias the buckets");
    RunConfig c{{5, 19}};
    c.replace_grads = replace;
    c.before_step = [&c](int rank) {
      if (rank + 1 == static_cast<int>(c.sizes.size())) std::this_thread::sleep_for(30ms);
    };
    expect_equivalent(c, 1e-5);
    c.sizes = {3, 14, 7};
    c.micro = 2;
    expect_equivalent(c, 1e-5);
    c.sizes = {12, 12};
    c.micro = 1;
    expect_equivalent(c, 1e-5);
  }
}

TEST(DdpEquivalence, Adam) {
  RunConfig c{{9, 15}};
  c.adam = true;
  expect_equivalent(c, 1e-5);
  c.sizes = {4, 7, 5, 8};
  expect_equivalent(c, 1e-5);
}

TEST(DdpEquivalence, GradientAccumulationWithNoSync) {
  RunConfig c{{11, 13}};
  c.micro = 3;  // micro-batches of unequal size (4,4,3 and 5,5,3)
  expect_equivalent(c, 1e-5);
  c.sizes = {7, 2, 9};
  c.adam = true;
  expect_equivalent(c, 1e-5);
}

TEST(DdpEquivalence, OneBucketAndDefaultBuckets) {
  RunConfig c{{12, 12}};
  c.options = DdpOptions{};  // the whole model fits the first bucket
  expect_equivalent(c, 1e-5);
}

// A model whose bucket is past the arena's one-round size: by default the bucket lives in
// shared memory and its all-reduce works in place in the peers' buckets (shm_window), with
// Avg for equal shares and pre-scaled sums for unequal ones; without shared buckets it goes
// through the arena. Both train like one process.
TEST(DdpEquivalence, SharedBucketsAllReduceInPlace) {
  RunConfig c{{12, 12}};
  c.options = DdpOptions{};
  c.hidden = 80;  // ~7.6 k parameters, 30 KB: one bucket
  c.algorithm = "shm_window";
  expect_equivalent(c, 1e-5);
  c.sizes = {5, 11, 8};
  expect_equivalent(c, 1e-5);
  c.sizes = {8, 8, 8};
  c.replace_grads = true;
  expect_equivalent(c, 1e-5);
  c.micro = 2;
  expect_equivalent(c, 1e-5);
  c.options.shared_buckets = false;
  c.algorithm = "shm_direct";
  expect_equivalent(c, 1e-5);
}

// When the host's shared memory cannot hold the buckets (here the creating rank's file-size
// limit, as with a tight memory limit), every rank keeps them in ordinary memory and trains the
// same.
TEST(DdpEquivalence, SharedBucketsFallBackToOrdinaryMemory) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the limit fails ftruncate (EFBIG)
  RunConfig c{{12, 12}};
  c.options = DdpOptions{};
  c.hidden = 80;
  c.algorithm = "shm_direct";
  c.before_ddp = [&saved](int rank) {
    rlimit small{16 * 1024, saved.rlim_max};  // the communicators' arenas exist already
    if (rank == 0) {
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    }
  };
  expect_equivalent(c, 1e-5);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
}

TEST(DdpEquivalence, CompressedGradients) {
  RunConfig c{{10, 14}};
  c.options.compression = GradCompression::Fp16;
  expect_equivalent(c, 2e-3);
  c.options.compression = GradCompression::Bf16;
  expect_equivalent(c, 2e-2);
  // A wire copy past the arena's one-round size lives in shared memory (shared_buckets, the
  // default): its all-reduce works in the peers' copies, accumulating in fp32 (shm_window).
  c.options = DdpOptions{};  // default buckets: one, ~30 k parameters
  c.options.compression = GradCompression::Bf16;
  c.hidden = 160;
  c.algorithm = "shm_window";
  expect_equivalent(c, 2e-2);
  c.options.compression = GradCompression::Fp16;
  expect_equivalent(c, 2e-3);
}

}  // namespace
}  // namespace chorus::train::testing
