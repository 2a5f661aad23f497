// ZeRO-3's memory per rank against PARALLEL.md section 3 (fp32 Adam K = 8, SGD-momentum
// K = 4: 16Ψ/d and 12Ψ/d between steps, Ψ with the units' padding), the gathered units' peak
// against the prefetch limit, the shard layout for checkpoints, and the refusals (each before
// anything changes).
#include "zero3_test_util.hpp"

#include <chorus/error.hpp>

namespace chorus::train::zero_test {
namespace {

void expect_memory(const Group& group, Opt opt, std::int64_t k, Zero3Options options) {
  SCOPED_TRACE(name(opt) + ", prefetch " + std::to_string(options.prefetch) + ", reshard " +
               std::to_string(options.reshard_after_forward));
  auto model = make_mlp(3, at::kFloat);
  Zero3 zero(model->parameters(), kMlpUnits, group, factory(opt), options);
  const std::int64_t d = group.size();
  std::int64_t padded = 0;
  std::int64_t largest = 0;
  std::int64_t all = 0;
  for (const auto& u : zero.unit_layouts()) {
    EXPECT_EQ(u.padded_numel % d, 0);
    EXPECT_LT(u.padded_numel - u.numel, d);
    padded += u.padded_numel;
    largest = std::max(largest, 4 * u.padded_numel);
    all += 4 * u.padded_numel;
  }
  EXPECT_EQ(zero.memory().parameters, 4 * padded / d);  // nothing gathered after construction
  EXPECT_EQ(zero.memory().peak_gathered, 0);
  const Data data = make_data(2, 4 * static_cast<int>(d), at::kFloat);
  for (int s = 0; s < 2; ++s) {
    zero.zero_grad();
    zero.begin_step();
    torch::mse_loss(sharded_mlp_forward(zero, *model, data.x[s].narrow(0, 4 * group.rank(), 4)),
                    data.y[s].narrow(0, 4 * group.rank(), 4))
        .backward();
    zero.finish_step();
    zero.step();
  }
  const Zero3::Memory m = zero.memory();
  EXPECT_EQ(m.parameters, 4 * padded / d);
  EXPECT_EQ(m.gradients, 4 * padded / d);
  EXPECT_EQ(m.optimizer_state, k * padded / d);
  // Section 3: ZeRO-3 is 16Ψ/d with Adam (K = 8), (8 + K)Ψ/d in general.
  EXPECT_EQ(m.parameters + m.gradients + m.optimizer_state, (8 + k) * padded / d);
  // During the step: resharding keeps at most prefetch + 1 units whole (exactly one without
  // prefetch); without resharding the forward leaves every unit whole.
  if (!options.reshard_after_forward) {
    EXPECT_EQ(m.peak_gathered, all);
  } else if (options.prefetch == 0) {
    EXPECT_EQ(m.peak_gathered, largest);
  } else {
    EXPECT_LE(m.peak_gathered, static_cast<std::int64_t>(options.prefetch + 1) * largest);
    EXPECT_GE(m.peak_gathered, largest);
  }
}

TEST(Zero3Memory, PerRankBytesMatchTheFormula) {
  for (int n : {1, 2, 4}) {
    on_ranks(n, [](const Group& group, int) {
      Zero3Options keep;
      keep.reshard_after_forward = false;
      Zero3Options none;
      none.prefetch = 0;
      expect_memory(group, Opt::Adam, 8, {});
      expect_memory(group, Opt::AdamW, 8, none);
      expect_memory(group, Opt::SgdMomentum, 4, keep);
    });
  }
}

// The GPT's units with resharding, over a first step (prefetching in unit order), an evaluation
// without gradients and two more steps (in the previous step's order): at most prefetch + 1
// blocks gathered at once besides the embedding unit, which the head runs again and which
// therefore stays gathered from the head's backward to the embedding's; nothing gathered after
// the evaluation.
TEST(Zero3Memory, GptGathersAtMostPrefetchPlusOneBlocks) {
  for (std::size_t prefetch : {0, 1, 2}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    on_ranks(2, [&](const Group& group, int rank) {
      Communicator comm = group.comm;
      const Group tp{comm.split(rank, 0), "tp", nullptr};
      GptModel model(gpt_config(5), tp);
      Zero3Options options;
      options.prefetch = prefetch;
      Zero3 zero(model.parameters(), gpt_units(model), group, factory(Opt::Adam), options);
      const auto& units = zero.unit_layouts();
      const std::int64_t embedding = 8 * units[0].padded_numel;
      std::int64_t block = 0;
      for (std::size_t u = 1; u < units.size(); ++u) {
        block = std::max(block, 8 * units[u].padded_numel);
      }
      const std::int64_t cols = kGptBatch / 2;
      const std::int64_t shards = zero.memory().parameters;
      for (std::size_t s = 0; s < 3; ++s) {
        if (s == 1) {
          at::NoGradGuard no_grad;
          gpt_loss(model, zero, gpt_tokens(9, 7, 3), gpt_tokens(9, 5, 1));
          EXPECT_EQ(zero.memory().parameters, shards) << "units left gathered by evaluation";
        }
        zero.zero_grad();
        zero.begin_step();
        gpt_loss(model, zero, gpt_tokens(s, 7, 3).narrow(1, rank * cols, cols),
                 gpt_tokens(s, 5, 1).narrow(1, rank * cols, cols))
            .backward();
        zero.finish_step();
        zero.step();
      }
      const std::int64_t peak = zero.memory().peak_gathered;
      EXPECT_LE(peak, static_cast<std::int64_t>(prefetch + 1) * block + embedding)
          << (peak - embedding) / static_cast<double>(block) << " blocks and the embedding";
      EXPECT_GE(peak, block + embedding);
    });
  }
}

// The pieces of every rank together cover every parameter element exactly once, and each piece
// holds the parameter's values; the optimizer state of a shard is the shard's size.
TEST(Zero3Memory, ShardLayoutForCheckpoints) {
  on_ranks(3, [](const Group& group, int) {
    auto model = make_mlp(3, at::kDouble);
    Zero3 zero(model->parameters(), kMlpUnits, group, factory(Opt::Adam));
    const auto initial = zero.full_parameters();  // rank 0's (broadcast at construction)
    const auto shards = zero.parameter_shards();
    std::vector<std::int64_t> covered(initial.size(), 0);
    for (int r = 0; r < 3; ++r) {
      for (const ShardPiece& p : shard_pieces(zero.unit_layouts(), 3, r)) {
        covered[p.param] += p.length;
        if (r != group.rank()) continue;
        expect_close(shards[p.shard].narrow(0, p.shard_offset, p.length),
                     initial[p.param].reshape(-1).narrow(0, p.param_offset, p.length), "piece");
      }
    }
    for (std::size_t i = 0; i < initial.size(); ++i) EXPECT_EQ(covered[i], initial[i].numel());
    EXPECT_EQ(zero.shard_layout(), shard_pieces(zero.unit_layouts(), 3, group.rank()));
    EXPECT_TRUE(shard_state(zero.optimizer(), shards[0]).tensors.empty());
    zero.begin_step();
    torch::mse_loss(sharded_mlp_forward(zero, *model, torch::ones({2, kIn}, at::kDouble)),
                    torch::zeros({2, kOut}, at::kDouble))
        .backward();
    zero.finish_step();
    zero.step();
    const ShardState state = shard_state(zero.optimizer(), shards[1]);
    EXPECT_EQ(state.step, 1);
    ASSERT_EQ(state.tensors.size(), 2u);
    EXPECT_EQ(state.tensors[0].first, "exp_avg");
    EXPECT_EQ(state.tensors[0].second.numel(), shards[1].numel());
    EXPECT_THROW(shard_state(zero.optimizer(), initial[0]), Error);
  });
}

/// `attempt` throws chorus::Error and leaves every parameter where and what it was.
void expect_refused_untouched(torch::nn::SequentialImpl& model,
                              const std::function<void()>& attempt) {
  std::vector<const void*> where;
  for (const auto& p : model.parameters()) where.push_back(p.data_ptr());
  const auto before = clone_params(model);
  EXPECT_THROW(attempt(), Error);
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].data_ptr(), where[i]);
    EXPECT_TRUE(params[i].detach().equal(before[i]));
  }
}

TEST(Zero3Memory, RefusalsChangeNothing) {
  on_ranks(2, [](const Group& group, int) {
    auto model = make_mlp(1, at::kFloat);
    const auto params = model->parameters();
    const auto build = [&](std::vector<std::vector<std::size_t>> units) {
      return [&, units] { Zero3 zero(params, units, group, factory(Opt::Adam)); };
    };
    expect_refused_untouched(*model, build({{0, 1}, {2, 3}}));             // misses 4 and 5
    expect_refused_untouched(*model, build({{0, 1}, {2, 3}, {3, 4, 5}}));  // 3 twice
    expect_refused_untouched(*model, build({{0, 1}, {2, 3}, {4, 5, 6}}));  // no parameter 6
    expect_refused_untouched(*model, build({{0, 1, 2, 3, 4, 5}, {}}));     // an empty unit
    // An optimizer over the model's parameters instead of the unit shards.
    expect_refused_untouched(*model, [&] {
      Zero3 zero(params, kMlpUnits, group,
                 [&](std::vector<at::Tensor>) { return make_optimizer(Opt::Adam, params); });
    });
    // The reducer's explicit buckets (one per unit under ZeRO-3): taken as given, and refused
    // when they miss a parameter or repeat one.
    ReducerOptions r;
    r.buckets = {{4, 5}, {0, 1, 2, 3}};
    const auto layouts = GradientReducer(params, group, r).bucket_layouts();
    ASSERT_EQ(layouts.size(), 2u);
    EXPECT_EQ(layouts[0].params, (std::vector<std::size_t>{4, 5}));
    EXPECT_EQ(layouts[1].offsets, (std::vector<std::int64_t>{0, 60, 70, 170}));
    r.buckets = {{4, 5}, {0, 1, 2}};
    EXPECT_THROW(GradientReducer(params, group, r), Error);
    r.buckets = {{4, 5}, {0, 1, 2, 3, 4}};
    EXPECT_THROW(GradientReducer(params, group, r), Error);
    Zero3 zero(params, kMlpUnits, group, factory(Opt::Adam));
    EXPECT_THROW(zero.run_unit(3, torch::ones({1, kIn}), [](const at::Tensor& x) { return x; }),
                 Error);
    zero.begin_step();
    EXPECT_THROW(zero.step(), Error);  // the gradient step is still active
  });
}

}  // namespace
}  // namespace chorus::train::zero_test
