// ZeRO-1 and ZeRO-2 against the one-process reference (fp64, rtol 1e-10): every parameter and
// every step's loss at dp 1-4 with SGD-momentum, Adam and AdamW, equal and unequal shares,
// global-norm clipping over the shards; and the ledger of every step. Gradient accumulation
// (no_sync): micro-batches run backward outside a step and accumulate locally, the last one
// inside it, and the step equals the reference on their union.
#include "zero_test_util.hpp"

namespace chorus::train::zero_test {
namespace {

constexpr int kSteps = 5;  ///< the optimizer steps every run takes
constexpr std::uint64_t kSeed = 7;

struct Run {
  int stage = 1;
  Opt opt = Opt::SgdMomentum;
  std::vector<int> sizes;  ///< rows of the global batch per rank
  double clip = 0;
};

/// The ledger of one step: the weighted step's sample all-reduce, one reduce-scatter per
/// bucket, one all-gather per bucket, each of the padded bucket's bytes.
std::vector<LedgerEntry> step_entries(const ZeroOptimizer& zero, bool clipped) {
  std::vector<LedgerEntry> out;
  if (zero.reducer().group().size() == 1) return out;
  const auto layouts = zero.reducer().bucket_layouts();
  out.push_back({"dp", CollectiveKind::AllReduce, 3 * sizeof(double)});
  for (const auto& b : layouts) {
    out.push_back({"dp", CollectiveKind::ReduceScatter, std::size_t(b.padded_numel) * 8});
  }
  if (clipped) out.push_back({"dp", CollectiveKind::AllReduce, sizeof(double)});
  for (const auto& b : layouts) {
    out.push_back({"dp", CollectiveKind::AllGather, std::size_t(b.padded_numel) * 8});
  }
  return out;
}

/// Every rank trains its rows (rank r > 0 starts from another seed: the construction's
/// broadcast must make it rank 0's); checks losses, parameters and the ledger.
void expect_equivalent(const Run& run) {
  SCOPED_TRACE("ZeRO-" + std::to_string(run.stage) + ", " + name(run.opt) + ", dp " +
               std::to_string(run.sizes.size()));
  int batch = 0;
  for (int s : run.sizes) batch += s;
  const Data d = make_data(kSteps, batch, at::kDouble);
  const Trained want = reference(d, run.opt, kSeed, run.clip);
  const int n = static_cast<int>(run.sizes.size());
  // Made before the threads start: torch's default generator is one for the process.
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
  for (int r = 0; r < n; ++r) models.push_back(make_mlp(r == 0 ? kSeed : 1000 + r, at::kDouble));
  on_ranks(n, [&](const Group& group, int rank) {
    auto model = models[std::size_t(rank)];
    ZeroOptimizer zero(model->parameters(), group, factory(run.opt), small_buckets(run.stage));
    EXPECT_GT(zero.reducer().bucket_layouts().size(), 3u);
    group.ledger->take();
    std::int64_t first = 0;
    for (int r = 0; r < rank; ++r) first += run.sizes[std::size_t(r)];
    const std::int64_t count = run.sizes[std::size_t(rank)];
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      zero.zero_grad();
      zero.begin_weighted_step(count, count);
      double local_loss = 0;  // a rank without samples takes no backward: it adds zeros
      if (count > 0) {
        auto loss = torch::mse_loss(model->forward(d.x[s].narrow(0, first, count)),
                                    d.y[s].narrow(0, first, count));
        loss.backward();
        local_loss = loss.item<double>();
      }
      zero.finish_step();
      if (run.stage == 2) {
        for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
      }
      if (run.clip > 0) {
        expect_close(torch::tensor(zero.clip_grad_norm(run.clip), at::kDouble),
                     torch::tensor(want.norms[s], at::kDouble),
                     "norm at step " + std::to_string(s));
      }
      zero.step();
      double global[1] = {local_loss * static_cast<double>(count) / batch};
      Communicator comm = group.comm;
      comm.all_reduce(global, global, 1, DataType::Float64, ReduceOp::Sum);
      expect_close(torch::tensor(global[0], at::kDouble),
                   torch::tensor(want.losses[s], at::kDouble), "loss at step " + std::to_string(s));
      const auto got = group.ledger->take();
      const auto expected = step_entries(zero, run.clip > 0);
      EXPECT_EQ(got, expected) << "step " << s << ": " << describe(got) << "; expected "
                               << describe(expected);
    }
    const auto params = clone_params(*model);
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i], want.params[i], "parameter " + std::to_string(i));
    }
  });
}

TEST(ZeroEquivalence, EveryStageOptimizerAndDegree) {
  const std::vector<std::vector<int>> splits{{12}, {6, 6}, {5, 4, 3}, {3, 3, 3, 3}};
  for (int stage : {1, 2}) {
    for (Opt opt : {Opt::SgdMomentum, Opt::Adam, Opt::AdamW}) {
      for (const auto& sizes : splits) expect_equivalent({stage, opt, sizes});
    }
  }
}

TEST(ZeroEquivalence, UnequalSharesAndAnIdleRank) {
  expect_equivalent({2, Opt::Adam, {1, 7, 0, 4}});
  expect_equivalent({1, Opt::SgdMomentum, {9, 3}});
}

// A max norm below the gradients' norm: every step clips, by the norm over the shards.
TEST(ZeroEquivalence, GlobalNormClippingOverTheShards) {
  for (int stage : {1, 2}) {
    expect_equivalent({stage, Opt::AdamW, {6, 6}, 0.05});
    expect_equivalent({stage, Opt::SgdMomentum, {5, 4, 3}, 0.05});
    expect_equivalent({stage, Opt::Adam, {3, 3, 3, 3}, 0.05});
  }
}

// Each rank's 12/d rows in two micro-batches: the first backward runs outside a step (the
// reducer's hooks do nothing; ZeRO-1 accumulates in its gradient buckets, ZeRO-2 in
// param.grad()), the second inside one, whose weight is the step's rows. No communication but
// the step's.
TEST(ZeroEquivalence, AccumulationOverMicroBatches) {
  constexpr int kBatch = 12;
  const Data d = make_data(kSteps, kBatch, at::kDouble);
  for (int stage : {1, 2}) {
    for (int n : {1, 2, 3, 4}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(stage) + ", dp " + std::to_string(n));
      const Trained want = reference(d, Opt::Adam, kSeed);
      // Built before the threads start: make_mlp seeds torch's one global generator.
      std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
      for (int r = 0; r < n; ++r) models.push_back(make_mlp(kSeed, at::kDouble));
      on_ranks(n, [&](const Group& group, int rank) {
        auto& model = models[static_cast<std::size_t>(rank)];
        ZeroOptimizer zero(model->parameters(), group, factory(Opt::Adam), small_buckets(stage));
        const std::int64_t rows = kBatch / n, first = rows / 2;
        for (std::size_t s = 0; s < d.x.size(); ++s) {
          const auto x = d.x[s].narrow(0, rank * rows, rows);
          const auto y = d.y[s].narrow(0, rank * rows, rows);
          zero.zero_grad();
          group.ledger->take();
          // Sums over the rows (the reference's mean is the sum over the global batch / 12).
          const auto part = [&](std::int64_t from, std::int64_t count) {
            torch::mse_loss(model->forward(x.narrow(0, from, count)), y.narrow(0, from, count),
                            torch::Reduction::Sum)
                .div(kBatch * kOut / n)
                .backward();
          };
          if (first > 0) part(0, first);
          EXPECT_TRUE(group.ledger->take().empty()) << "the unsynced micro-batch communicated";
          zero.begin_step();
          part(first, rows - first);
          zero.finish_step();
          zero.step();
        }
        const auto params = clone_params(*model);
        for (std::size_t i = 0; i < params.size(); ++i) {
          expect_close(params[i], want.params[i], "parameter " + std::to_string(i));
        }
      });
    }
  }
}

}  // namespace
}  // namespace chorus::train::zero_test
