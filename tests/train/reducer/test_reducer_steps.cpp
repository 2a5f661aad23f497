// The reducer's step protocol (threads as ranks): the explicit ready call gives exactly what
// the autograd hooks give, a parameter never marked ready is an error at finish_step on the
// ranks that missed it while their peers finish (no hang), and misuse is named.
#include "reducer_test_util.hpp"

#include <chorus/error.hpp>

#include <torch/torch.h>

namespace chorus::train::reducer_test {
namespace {

/// A two-layer fp64 network: W1 [5, 4], b1 [5], W2 [3, 5], b2 [3], the same on every rank.
std::vector<at::Tensor> tiny_params() {
  std::vector<at::Tensor> out;
  const std::vector<std::vector<std::int64_t>> shapes{{5, 4}, {5}, {3, 5}, {3}};
  for (std::size_t i = 0; i < shapes.size(); ++i)
    out.push_back(filled(shapes[i], 0.1 * static_cast<double>(i + 1)).requires_grad_());
  return out;
}

/// Rank `rank`'s mean squared error in `step` (its own six samples).
at::Tensor tiny_loss(const std::vector<at::Tensor>& p, int rank, int step) {
  const at::Tensor x = filled({6, 4}, 1.7 * rank + 0.9 * step);
  const at::Tensor y = filled({6, 3}, 2.3 * rank + 0.4 * step);
  const at::Tensor out = torch::tanh(x.mm(p[0].t()) + p[1]).mm(p[2].t()) + p[3];
  return (out - y).pow(2).mean();
}

/// The mean over n ranks of their gradients, each computed on its own (no reducer).
std::vector<at::Tensor> reference_grads(int n, int step) {
  std::vector<at::Tensor> sum;
  for (int r = 0; r < n; ++r) {
    std::vector<at::Tensor> p = tiny_params();
    const auto g = torch::autograd::grad({tiny_loss(p, r, step)}, p);
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (r == 0) sum.push_back(g[i] / n);
      if (r > 0) sum[i] += g[i] / n;
    }
  }
  return sum;
}

TEST(GradientReducerSteps, ExplicitReadyEqualsTheHooks) {
  for (int n = 1; n <= 3; ++n) {
    on_ranks(n, [n](const Group& group, int rank) {
      ReducerOptions with_hooks = small_buckets();
      with_hooks.autograd_hooks = true;
      std::vector<at::Tensor> hooked = tiny_params();
      std::vector<at::Tensor> marked = tiny_params();
      GradientReducer by_hooks(hooked, group, with_hooks);
      GradientReducer by_calls(marked, group, small_buckets());
      for (int step = 0; step < 2; ++step) {
        for (at::Tensor& p : hooked) {
          if (p.grad().defined()) p.mutable_grad().zero_();  // as Optimizer::zero_grad
        }
        by_hooks.begin_step();
        tiny_loss(hooked, rank, step).backward();
        by_hooks.finish_step();
        // A zero-bubble W step: the weight gradients computed apart from the accumulators.
        by_calls.begin_step();
        const auto grads = torch::autograd::grad({tiny_loss(marked, rank, step)}, marked);
        for (std::size_t i = marked.size(); i-- > 0;) {
          marked[i].mutable_grad() = grads[i];
          by_calls.mark_ready(marked[i]);
        }
        by_calls.finish_step();
        const auto want = reference_grads(n, step);
        for (std::size_t i = 0; i < marked.size(); ++i) {
          const std::string what =
              "step " + std::to_string(step) + ", parameter " + std::to_string(i);
          EXPECT_TRUE(torch::equal(marked[i].grad(), hooked[i].grad())) << what;
          expect_close(marked[i].grad(), want[i], what);
        }
      }
      if (n > 1) {
        EXPECT_GT(by_calls.stats().buckets_launched_early, 0);
        EXPECT_GT(by_hooks.stats().buckets_launched_early, 0);
      }
    });
  }
}

/// finish_step's error on a rank that did not mark `missing`: InvalidArgument naming it.
void expect_missing_error(GradientReducer& reducer, std::size_t missing) {
  try {
    reducer.finish_step();
    ADD_FAILURE() << "finish_step accepted parameter " << missing << " never marked ready";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("(indices " + std::to_string(missing) + ")"),
              std::string::npos)
        << e.what();
  }
}

// Every rank misses the same parameter, or only rank 1 misses one (the parameter 0 of the last
// bucket, which its peers launch and wait for): the ranks that missed throw, the others finish,
// and the next step is right everywhere (every rank issued the same collectives).
TEST(GradientReducerSteps, NeverMarkedReadyIsAnErrorNotAHang) {
  for (const bool everyone : {true, false}) {
    SCOPED_TRACE(everyone ? "every rank misses parameter 2" : "rank 1 misses parameter 0");
    on_ranks(3, [everyone](const Group& group, int rank) {
      std::vector<at::Tensor> params = make_params({at::kDouble});
      GradientReducer reducer(params, group, small_buckets());
      const std::size_t missing = everyone ? 2 : 0;
      const bool misses = everyone || rank == 1;
      reducer.begin_step();
      mark_all(reducer, params, rank, 0, misses ? missing : SIZE_MAX);
      if (misses) {
        expect_missing_error(reducer, missing);
      } else {
        reducer.finish_step();
      }
      EXPECT_FALSE(reducer.step_active());
      reducer.begin_step();
      mark_all(reducer, params, rank, 1);
      reducer.finish_step();
      for (std::size_t i = 0; i < params.size(); ++i) {
        expect_close(params[i].grad(), mean_of(params[i], {0, 1, 2}, i, 1, 3),
                     "parameter " + std::to_string(i));
      }
    });
  }
}

TEST(GradientReducerSteps, ZeroMissingReducesMissingGradientsAsZeros) {
  on_ranks(2, [](const Group& group, int rank) {
    std::vector<at::Tensor> params = make_params({at::kDouble});
    ReducerOptions options = small_buckets();
    options.zero_missing = true;
    GradientReducer reducer(params, group, options);
    reducer.begin_step();
    mark_all(reducer, params, rank, 0, rank == 0 ? 3 : SIZE_MAX);
    reducer.finish_step();
    expect_close(params[3].grad(), mean_of(params[3], {1}, 3, 0, 2), "parameter 3");
    expect_close(params[1].grad(), mean_of(params[1], {0, 1}, 1, 0, 2), "parameter 1");
  });
}

TEST(GradientReducerSteps, MisuseIsNamed) {
  on_ranks(1, [](const Group& group, int) {
    std::vector<at::Tensor> params = make_params({at::kDouble});
    params.push_back(torch::zeros({3}, at::kDouble));  // 5: not trained
    GradientReducer reducer(params, group, small_buckets());
    const auto status_of = [](const std::function<void()>& f) {
      try {
        f();
      } catch (const Error& e) {
        return e.status();
      }
      return Status::Success;
    };
    EXPECT_EQ(status_of([&] { reducer.mark_ready(0); }), Status::InvalidUsage);  // no step
    EXPECT_EQ(status_of([&] { reducer.finish_step(); }), Status::InvalidUsage);
    reducer.begin_step();
    EXPECT_EQ(status_of([&] { reducer.begin_step(); }), Status::InvalidUsage);
    EXPECT_EQ(status_of([&] { reducer.mark_ready(5); }), Status::InvalidArgument);
    EXPECT_EQ(status_of([&] { reducer.mark_ready(6); }), Status::InvalidArgument);
    EXPECT_EQ(status_of([&] { reducer.mark_ready(torch::zeros({2})); }), Status::InvalidArgument);
    reducer.mark_ready(1);
    EXPECT_EQ(status_of([&] { reducer.mark_ready(params[1]); }), Status::InvalidUsage);
    EXPECT_EQ(status_of([&] { reducer.begin_weighted_step(-1, 3); }), Status::InvalidArgument);
    const auto make = [&](std::vector<at::Tensor> p, ReducerOptions o) {
      return [&group, p, o] { GradientReducer r(p, group, o); };
    };
    ReducerOptions negative = small_buckets();
    negative.divisor = -2;
    EXPECT_EQ(status_of(make(make_params({at::kDouble}), negative)), Status::InvalidArgument);
    EXPECT_EQ(status_of(make({params[0], params[0]}, small_buckets())), Status::InvalidArgument);
    ReducerOptions hooks = small_buckets();
    hooks.autograd_hooks = true;
    EXPECT_EQ(status_of(make({params[0] * 2}, hooks)), Status::InvalidArgument);  // not a leaf
  });
}

}  // namespace
}  // namespace chorus::train::reducer_test
