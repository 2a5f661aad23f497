// Column- and row-parallel linear layers against one-process references (threads as ranks,
// fp64, tp 1-4): the output, the input gradient and the weight/bias gradients, reassembled
// from the ranks' shards, equal what torch::linear gives on the full tensors, and the ledger
// holds exactly PARALLEL.md section 2's collectives.
#include <chorus/train/autograd.hpp>
#include <chorus/train/random.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include "tp_test_util.hpp"

namespace chorus::train {
namespace {

using namespace tp_test;

constexpr std::int64_t kSeq = 12, kBatch = 2, kHidden = 12, kFfn = 24;
constexpr std::size_t kActivationBytes = kSeq * kBatch * kHidden * sizeof(double);

ParameterInit init(const std::string& name) {
  return {.seed = 7, .name = name, .init_std = 0.5, .dtype = at::kDouble};
}

/// The full weight [out, in] the degree-1 layer `name` starts from.
at::Tensor full_weight(const std::string& name, std::int64_t out, std::int64_t in) {
  const std::string weight = name + ".weight";
  return init_slice(
      {.seed = 7, .name = weight, .kind = InitKind::Normal, .scale = 0.5, .dtype = at::kDouble},
      {out, in});
}

/// A reference parameter: a leaf that requires grad.
at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(); }

/// Overwrites a parameter's values (biases start at zero; the tests want them non-zero).
void assign(const at::Tensor& parameter, const at::Tensor& values) {
  at::NoGradGuard no_grad;
  parameter.copy_(values);
}

TEST(ColumnParallel, ShardsAreSlicesOfTheDegreeOneWeights) {
  run([](const Group& g, int r, int n) {
    ColumnParallelLinear column(kHidden, kFfn, g, init("fc1"));
    RowParallelLinear row(kFfn, kHidden, g, init("fc2"));
    EXPECT_TRUE(at::equal(column.weight(), slice(full_weight("fc1", kFfn, kHidden), n, r, 0)));
    EXPECT_TRUE(at::equal(row.weight(), slice(full_weight("fc2", kHidden, kFfn), n, r, 1)));
    EXPECT_EQ(column.bias().sizes(), at::IntArrayRef({kFfn / n}));
    EXPECT_EQ(row.bias().sizes(), at::IntArrayRef({kHidden}));
    EXPECT_EQ(column.parameters().size(), 2u);
  });
}

// y = x·Wᵀ + b, loss Σ y ⊙ w: the output (own shard or gathered), x's gradient (all-reduced
// in backward) and the shards' gradients match the full computation.
TEST(ColumnParallel, MatchesTheFullLinearWithAndWithoutGatheredOutput) {
  run([](const Group& g, int r, int n) {
    for (bool gather : {false, true}) {
      SCOPED_TRACE(gather ? "gather_output" : "sharded output");
      ColumnParallelLinear column(kHidden, kFfn, g, init("fc1"), {.gather_output = gather});
      const at::Tensor bias = filled({kFfn}, 3.0), w = filled({kSeq, kBatch, kFfn}, 4.0);
      assign(column.bias(), slice(bias, n, r, 0));
      at::Tensor x = filled({kSeq, kBatch, kHidden}, 1.0).requires_grad_();
      at::Tensor y = column.forward(x);
      const std::size_t out_bytes = kSeq * kBatch * kFfn * sizeof(double);
      expect_ledger(g,
                    gather ? std::vector{tp_entry(CollectiveKind::AllGather, out_bytes)}
                           : std::vector<LedgerEntry>{},
                    "forward");
      (y * (gather ? w : slice(w, n, r, -1))).sum().backward();
      expect_ledger(g, {tp_entry(CollectiveKind::AllReduce, kActivationBytes)}, "backward");

      at::Tensor xf = leaf(x), wf = leaf(full_weight("fc1", kFfn, kHidden)), bf = leaf(bias);
      at::Tensor yf = at::linear(xf, wf, bf);
      (yf * w).sum().backward();
      expect_close(gather ? y : reassembled(g, y, -1), yf, "output");
      expect_close(x.grad(), xf.grad(), "input gradient");
      expect_close(reassembled(g, column.weight().grad(), 0), wf.grad(), "weight gradient");
      expect_close(reassembled(g, column.bias().grad(), 0), bf.grad(), "bias gradient");
    }
  });
}

// y = Σ_r x_r·W_rᵀ + b: the input arrives sharded (input_is_parallel) or full and split; the
// output is all-reduced forward; the bias gradient is the full one on every rank.
TEST(RowParallel, MatchesTheFullLinearWithParallelOrSplitInput) {
  run([](const Group& g, int r, int n) {
    for (bool parallel : {true, false}) {
      SCOPED_TRACE(parallel ? "input_is_parallel" : "split input");
      RowParallelLinear row(kFfn, kHidden, g, init("fc2"), {.input_is_parallel = parallel});
      const at::Tensor bias = filled({kHidden}, 5.0), w = filled({kSeq, kBatch, kHidden}, 6.0);
      assign(row.bias(), bias);
      const at::Tensor full_x = filled({kSeq, kBatch, kFfn}, 2.0);
      at::Tensor x = (parallel ? slice(full_x, n, r, -1) : full_x).clone().requires_grad_();
      at::Tensor y = row.forward(x);
      expect_ledger(g, {tp_entry(CollectiveKind::AllReduce, kActivationBytes)}, "forward");
      (y * w).sum().backward();
      const std::size_t input_bytes = kSeq * kBatch * kFfn * sizeof(double);
      expect_ledger(g,
                    parallel ? std::vector<LedgerEntry>{}
                             : std::vector{tp_entry(CollectiveKind::AllGather, input_bytes)},
                    "backward");

      at::Tensor xf = leaf(full_x), wf = leaf(full_weight("fc2", kHidden, kFfn)), bf = leaf(bias);
      at::Tensor yf = at::linear(xf, wf, bf);
      (yf * w).sum().backward();
      expect_close(y, yf, "output");
      expect_close(parallel ? reassembled(g, x.grad(), -1) : x.grad(), xf.grad(), "input gradient");
      expect_close(reassembled(g, row.weight().grad(), 1), wf.grad(), "weight gradient");
      expect_close(row.bias().grad(), bf.grad(), "bias gradient");
      EXPECT_TRUE(row.partial_gradient_parameters().empty());
    }
  });
}

/// Megatron's MLP: column (h → ffn), GELU, row (ffn → h), with or without sequence
/// parallelism; the input and output are [s, b, h], sharded along s under sequence parallelism.
void check_mlp(bool sp) {
  run([sp](const Group& g, int r, int n) {
    ColumnParallelLinear fc1(kHidden, kFfn, g, init("fc1"), {.sequence_parallel = sp});
    RowParallelLinear fc2(kFfn, kHidden, g, init("fc2"), {.sequence_parallel = sp});
    const at::Tensor b1 = filled({kFfn}, 3.0), b2 = filled({kHidden}, 5.0);
    assign(fc1.bias(), slice(b1, n, r, 0));
    assign(fc2.bias(), b2);
    const at::Tensor full_x = filled({kSeq, kBatch, kHidden}, 1.0);
    const at::Tensor w = filled({kSeq, kBatch, kHidden}, 8.0);
    at::Tensor x = (sp ? slice(full_x, n, r, 0) : full_x).clone().requires_grad_();
    at::Tensor y = fc2.forward(at::gelu(fc1.forward(x)));
    using K = CollectiveKind;
    const auto fwd = sp ? std::vector{tp_entry(K::AllGather, kActivationBytes),
                                      tp_entry(K::ReduceScatter, kActivationBytes)}
                        : std::vector{tp_entry(K::AllReduce, kActivationBytes)};
    expect_ledger(g, fwd, "forward");
    // Under sequence parallelism each rank's loss covers its slice; the total is their sum.
    (y * (sp ? slice(w, n, r, 0) : w)).sum().backward();
    // fc2's backward gathers the output gradient; fc1's gathers its input again (it kept only
    // its s/t rows) and reduce-scatters the input gradient.
    const auto bwd = sp ? std::vector{tp_entry(K::AllGather, kActivationBytes),
                                      tp_entry(K::AllGather, kActivationBytes),
                                      tp_entry(K::ReduceScatter, kActivationBytes)}
                        : std::vector{tp_entry(K::AllReduce, kActivationBytes)};
    expect_ledger(g, bwd, "backward");

    at::Tensor xf = leaf(full_x), w1 = leaf(full_weight("fc1", kFfn, kHidden)), b1f = leaf(b1);
    at::Tensor w2 = leaf(full_weight("fc2", kHidden, kFfn)), b2f = leaf(b2);
    at::Tensor yf = at::linear(at::gelu(at::linear(xf, w1, b1f)), w2, b2f);
    (yf * w).sum().backward();
    expect_close(sp ? reassembled(g, y, 0) : y, yf, "output");
    expect_close(sp ? reassembled(g, x.grad(), 0) : x.grad(), xf.grad(), "input gradient");
    expect_close(reassembled(g, fc1.weight().grad(), 0), w1.grad(), "fc1 weight gradient");
    expect_close(reassembled(g, fc1.bias().grad(), 0), b1f.grad(), "fc1 bias gradient");
    expect_close(reassembled(g, fc2.weight().grad(), 1), w2.grad(), "fc2 weight gradient");
    // Under sequence parallelism the row bias's gradient is partial: summed over tp it is full.
    const at::Tensor b2_grad = sp ? sum_over(g, fc2.bias().grad()) : fc2.bias().grad();
    expect_close(b2_grad, b2f.grad(), "fc2 bias gradient");
    EXPECT_EQ(fc2.partial_gradient_parameters().size(), sp ? 1u : 0u);
  });
}

TEST(ParallelMlp, MatchesTheFullMlp) { check_mlp(false); }
TEST(ParallelMlp, MatchesTheFullMlpUnderSequenceParallelism) { check_mlp(true); }

TEST(ParallelLinear, BadSizesAreSentences) {
  run([](const Group& g, int, int n) {
    if (n != 3) return;
    try {
      ColumnParallelLinear(kHidden, 10, g, init("fc1"));
      ADD_FAILURE() << "10 output features split over 3 ranks";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "ColumnParallelLinear: out_features 10 is not a multiple of the tp group's 3 "
                   "ranks");
    }
    EXPECT_THROW(RowParallelLinear(10, kHidden, g, init("fc2")), Error);
    EXPECT_THROW(RowParallelLinear(kFfn, kHidden, g, init("fc2"),
                                   {.input_is_parallel = false, .sequence_parallel = true}),
                 Error);
    RowParallelLinear row(kFfn, kHidden, g, init("fc2"));
    try {
      row.forward(filled({2, kFfn}, 0.0));
      ADD_FAILURE() << "a full input given to input_is_parallel";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "RowParallelLinear: the input's last dimension is 24, expected 8");
    }
    expect_ledger(g, {}, "nothing communicated");
  });
}

}  // namespace
}  // namespace chorus::train
