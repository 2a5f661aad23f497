// The deferred weight gradient of the column- and row-parallel layers (threads as ranks, fp64,
// tp 1-4, with and without sequence parallelism): backward leaves weight().grad() untouched and
// issues the same collectives; compute_weight_gradients() then gives the gradient of the layer
// without deferral, and backwards left pending add up.
#include <chorus/train/tensor_parallel.hpp>

#include "tp_test_util.hpp"

namespace chorus::train {
namespace {

using namespace tp_test;

constexpr std::int64_t kSeq = 12, kBatch = 2, kHidden = 12, kFfn = 24;

ParameterInit init(const std::string& name) {
  return {.seed = 7, .name = name, .init_std = 0.5, .dtype = at::kDouble};
}

/// An MLP (column h -> 4h, GELU, row 4h -> h) with or without deferred weight gradients.
struct Mlp {
  ColumnParallelLinear fc1;
  RowParallelLinear fc2;
  Mlp(const Group& g, bool sp, bool defer)
      : fc1(kHidden, kFfn, g, init("fc1"),
            {.sequence_parallel = sp, .defer_weight_gradient = defer}),
        fc2(kFfn, kHidden, g, init("fc2"),
            {.sequence_parallel = sp, .defer_weight_gradient = defer}) {}
  /// Σ forward(x) ⊙ w; x is this rank's input (its sequence slice under sp).
  at::Tensor loss(const at::Tensor& x, double salt) const {
    const at::Tensor y = fc2.forward(at::gelu(fc1.forward(x)));
    return (y * filled(y.sizes(), salt)).sum();
  }
};

at::Tensor input(const Group& g, bool sp) {
  const at::Tensor full = filled({kSeq, kBatch, kHidden}, 1.0);
  return (sp ? slice(full, g.size(), g.rank(), 0) : full).clone().requires_grad_();
}

TEST(DeferredWeightGradient, EqualsTheGradientWithoutDeferral) {
  run([](const Group& g, int, int) {
    for (bool sp : {false, true}) {
      SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
      const Mlp plain(g, sp, false), deferred(g, sp, true);
      const at::Tensor x = input(g, sp), xd = input(g, sp);
      plain.loss(x, 2.0).backward();
      const std::vector<LedgerEntry> collectives = g.ledger->take();
      deferred.loss(xd, 2.0).backward();
      expect_ledger(g, collectives, "the same collectives with deferral");
      EXPECT_FALSE(deferred.fc1.weight().grad().defined());
      EXPECT_FALSE(deferred.fc2.weight().grad().defined());
      EXPECT_EQ(deferred.fc1.pending_weight_gradients(), 1u);
      expect_close(xd.grad(), x.grad(), "input gradient", 1e-12);
      expect_close(deferred.fc1.bias().grad(), plain.fc1.bias().grad(), "bias gradient", 1e-12);

      EXPECT_EQ(deferred.fc1.compute_weight_gradients(), 1u);
      EXPECT_EQ(deferred.fc2.compute_weight_gradients(), 1u);
      EXPECT_EQ(deferred.fc1.pending_weight_gradients(), 0u);
      expect_close(deferred.fc1.weight().grad(), plain.fc1.weight().grad(), "fc1", 1e-12);
      expect_close(deferred.fc2.weight().grad(), plain.fc2.weight().grad(), "fc2", 1e-12);
      EXPECT_EQ(deferred.fc1.compute_weight_gradients(), 0u) << "nothing left";
      EXPECT_EQ(plain.fc1.compute_weight_gradients(), 0u) << "no deferral";
    }
  });
}

// Two micro-batches' backwards before one call: the call adds both, as two plain backwards
// accumulate both into .grad.
TEST(DeferredWeightGradient, PendingBackwardsAddUp) {
  run([](const Group& g, int, int) {
    const Mlp plain(g, false, false), deferred(g, false, true);
    for (double salt : {2.0, 5.0}) {
      plain.loss(input(g, false), salt).backward();
      deferred.loss(input(g, false), salt).backward();
    }
    EXPECT_EQ(deferred.fc2.pending_weight_gradients(), 2u);
    EXPECT_EQ(deferred.fc2.compute_weight_gradients(), 2u);
    EXPECT_EQ(deferred.fc1.compute_weight_gradients(), 2u);
    expect_close(deferred.fc1.weight().grad(), plain.fc1.weight().grad(), "fc1", 1e-12);
    expect_close(deferred.fc2.weight().grad(), plain.fc2.weight().grad(), "fc2", 1e-12);
  });
}

}  // namespace
}  // namespace chorus::train
