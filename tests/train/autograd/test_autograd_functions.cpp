// The communicating autograd functions against one-process references: at group sizes 1-4
// (threads as ranks, fp64), each rank's forward output and input gradient equal what plain
// torch ops on the full tensors give, and each call records exactly one collective forward and
// one backward in the ledger, with the logical operation's bytes.
#include <chorus/train/autograd.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

using chorus::testing::ThreadJob;

/// A deterministic tensor of `shape` (the same on every rank; `salt` tells tensors apart).
at::Tensor filled(at::IntArrayRef shape, double salt, at::ScalarType dtype = at::kDouble) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return at::sin(at::arange(n, at::kDouble) * 0.731 + salt).reshape(shape).to(dtype);
}

/// Rank r's slice r of `full` along `dim`, as the reference computes it.
at::Tensor slice(const at::Tensor& full, int parts, int r, std::int64_t dim) {
  return full.chunk(parts, dim)[r];
}

/// Sum over ranks of filled(shape, salt + r).
at::Tensor sum_over_ranks(at::IntArrayRef shape, double salt, int ranks) {
  at::Tensor sum = at::zeros(shape, at::kDouble);
  for (int r = 0; r < ranks; ++r) sum += filled(shape, salt + r);
  return sum;
}

void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(at::allclose(a, b, 1e-12, 1e-12)) << what << "\n" << a << "\n" << b;
}

/// A Group of the whole thread job, named "tp", with a ledger recording from the start.
Group whole(Communicator& comm) {
  auto ledger = std::make_shared<CollectiveLedger>();
  ledger->enable();
  return Group{comm, "tp", ledger};
}

/// The ledger's entries: exactly `expected` (none on a group of one rank).
void expect_ledger(const Group& g, std::vector<LedgerEntry> expected) {
  if (g.size() == 1) expected.clear();
  EXPECT_EQ(g.ledger->take(), expected) << describe(expected);
}

constexpr std::size_t kDouble = sizeof(double);

/// Runs body(group, rank, size) on groups of 1, 2, 3 and 4 thread-ranks (one ctest entry per
/// function, not per size: each entry pays for loading libtorch).
void run(const std::function<void(const Group&, int, int)>& body) {
  for (int n = 1; n <= 4; ++n) {
    ThreadJob job(n);
    ASSERT_TRUE(job.ok());
    job.run([&](Communicator& c) {
      SCOPED_TRACE("group of " + std::to_string(n) + ", rank " + std::to_string(c.rank()));
      body(whole(c), c.rank(), c.size());
    });
  }
}

TEST(Functions, CopyToRegionIsIdentityForwardAllReduceBackward) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({3, 5}, 0.5).requires_grad_();
    at::Tensor y = copy_to_region(x, g);
    EXPECT_TRUE(at::equal(y, x));
    expect_ledger(g, {});
    (y * filled({3, 5}, 10.0 + r)).sum().backward();
    expect_close(x.grad(), sum_over_ranks({3, 5}, 10.0, n), "grad");
    expect_ledger(g, {{"tp", CollectiveKind::AllReduce, 15 * kDouble}});
  });
}

TEST(Functions, ReduceFromRegionIsAllReduceForwardIdentityBackward) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({4, 3}, 1.0 + r).requires_grad_();
    at::Tensor y = reduce_from_region(x, g);
    expect_close(y, sum_over_ranks({4, 3}, 1.0, n), "forward");
    expect_ledger(g, {{"tp", CollectiveKind::AllReduce, 12 * kDouble}});
    at::Tensor w = filled({4, 3}, 7.0);
    (y * w).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), w));
    expect_ledger(g, {});
  });
}

// Forward all-gather of the slices; a replicated loss downstream: backward keeps the own slice.
TEST(Functions, GatherAlongDimKeepsTheOwnSliceOfTheGradient) {
  run([](const Group& g, int r, int n) {
    for (std::int64_t dim : {0, 1, -1}) {
      at::Tensor full = filled({2 * n, 3 * n}, 2.0), w = filled({2 * n, 3 * n}, 3.0);
      at::Tensor x = slice(full, n, r, dim).clone().requires_grad_();
      at::Tensor y = gather_along_dim(x, g, dim);
      EXPECT_TRUE(at::equal(y, full)) << "dim " << dim;
      (y * w).sum().backward();
      EXPECT_TRUE(at::equal(x.grad(), slice(w, n, r, dim))) << "dim " << dim;
      expect_ledger(g, {{"tp", CollectiveKind::AllGather, full.nbytes()}});
    }
  });
}

// Forward keeps the own slice; each rank's loss uses its slice: backward all-gathers.
TEST(Functions, SplitAlongDimAllGathersTheGradient) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({3, 2 * n}, 4.0).requires_grad_(), w = filled({3, 2 * n}, 5.0);
    at::Tensor y = split_along_dim(x, g, 1);
    EXPECT_TRUE(at::equal(y, slice(x.detach(), n, r, 1)));
    expect_ledger(g, {});
    (y * slice(w, n, r, 1)).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), w));  // d/dx of sum_r (x_r · w_r) = w
    expect_ledger(g, {{"tp", CollectiveKind::AllGather, w.nbytes()}});
  });
}

// Partial sums in, own slice of the total out; backward all-gathers the slices' gradients.
TEST(Functions, ReduceScatterAlongDimMatchesSliceOfTheSum) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({2 * n, 3}, 6.0 + r).requires_grad_(), w = filled({2 * n, 3}, 9.0);
    at::Tensor y = reduce_scatter_along_dim(x, g, 0);
    expect_close(y, slice(sum_over_ranks({2 * n, 3}, 6.0, n), n, r, 0), "forward");
    expect_ledger(g, {{"tp", CollectiveKind::ReduceScatter, x.nbytes()}});
    (y * slice(w, n, r, 0)).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), w));
    expect_ledger(g, {{"tp", CollectiveKind::AllGather, w.nbytes()}});
  });
}

// Sequence parallelism: every rank consumes the gathered tensor differently (loss summed over
// ranks), so backward reduce-scatters the per-rank gradients.
TEST(Functions, AllGatherAlongDimReduceScattersTheGradient) {
  run([](const Group& g, int r, int n) {
    at::Tensor full = filled({n, 2, 3}, 11.0);
    at::Tensor x = slice(full, n, r, 0).clone().requires_grad_();
    at::Tensor y = all_gather_along_dim(x, g, 0);
    EXPECT_TRUE(at::equal(y, full));
    expect_ledger(g, {{"tp", CollectiveKind::AllGather, full.nbytes()}});
    (y * filled({n, 2, 3}, 20.0 + r)).sum().backward();
    expect_close(x.grad(), slice(sum_over_ranks({n, 2, 3}, 20.0, n), n, r, 0), "grad");
    expect_ledger(g, {{"tp", CollectiveKind::ReduceScatter, full.nbytes()}});
  });
}

// Ulysses: [s/u, heads, d] -> [s, heads/u, d] and back; the reference slices the full tensor.
TEST(Functions, SequenceToHeadsAndBackMatchTheFullTensor) {
  run([](const Group& g, int r, int n) {
    const std::int64_t s = 2 * n, heads = 2 * n, d = 3;
    at::Tensor full = filled({s, heads, d}, 12.0), w = filled({s, heads, d}, 13.0);
    at::Tensor x = slice(full, n, r, 0).clone().requires_grad_();
    at::Tensor y = sequence_to_heads(x, g);
    EXPECT_TRUE(at::equal(y, slice(full, n, r, 1)));
    expect_ledger(g, {{"tp", CollectiveKind::AllToAll, x.nbytes()}});
    (y * slice(w, n, r, 1)).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), slice(w, n, r, 0)));
    expect_ledger(g, {{"tp", CollectiveKind::AllToAll, x.nbytes()}});

    at::Tensor h = slice(full, n, r, 1).clone().requires_grad_();
    at::Tensor z = heads_to_sequence(h, g);
    EXPECT_TRUE(at::equal(z, slice(full, n, r, 0)));
    (z * slice(w, n, r, 0)).sum().backward();
    EXPECT_TRUE(at::equal(h.grad(), slice(w, n, r, 1)));
    expect_ledger(g, {{"tp", CollectiveKind::AllToAll, h.nbytes()},
                      {"tp", CollectiveKind::AllToAll, h.nbytes()}});
  });
}

// seq -> heads -> seq is the identity, gradients included; a batch dimension in front.
TEST(Functions, UlyssesRoundTripIsTheIdentity) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({2, 3, 3 * n, 4}, 14.0 + r).requires_grad_();
    at::Tensor back = heads_to_sequence(sequence_to_heads(x, g, 1, 2), g, 1, 2);
    EXPECT_TRUE(at::equal(back, x));
    at::Tensor w = filled({2, 3, 3 * n, 4}, 15.0 + r);
    (back * w).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), w));
    EXPECT_EQ(g.ledger->take().size(), g.size() == 1 ? 0u : 4u);
  });
}

// The GPT model's layout: [s/u, b, heads, 3, d] with the sequence first and the heads third;
// the first all-to-all gives [s, b, heads/u, 3, d], the second undoes it, gradients included.
TEST(Functions, UlyssesRoundTripOnTheModelLayout) {
  run([](const Group& g, int r, int n) {
    const std::int64_t s = 2 * n, heads = 3 * n;
    at::Tensor full = filled({s, 2, heads, 3, 2}, 17.0), w = filled({s, 2, heads, 3, 2}, 18.0);
    at::Tensor x = slice(full, n, r, 0).clone().requires_grad_();
    at::Tensor y = sequence_to_heads(x, g, 0, 2);
    EXPECT_TRUE(at::equal(y, slice(full, n, r, 2)));
    at::Tensor back = heads_to_sequence(y, g, 0, 2);
    EXPECT_TRUE(at::equal(back, x));
    (back * slice(w, n, r, 0)).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), slice(w, n, r, 0)));
    const LedgerEntry entry{"tp", CollectiveKind::AllToAll, x.nbytes()};
    expect_ledger(g, {entry, entry, entry, entry});
  });
}

TEST(Functions, Float32Works) {
  run([](const Group& g, int r, int n) {
    at::Tensor x = filled({2, n}, 16.0 + r, at::kFloat).requires_grad_();
    at::Tensor y = reduce_scatter_along_dim(reduce_from_region(x, g), g, 1);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    at::Tensor expected = slice(sum_over_ranks({2, n}, 16.0, n), n, r, 1).to(at::kFloat);
    EXPECT_TRUE(at::allclose(y, expected * n, 1e-5, 1e-5)) << y << expected;
    y.sum().backward();
    EXPECT_EQ(x.grad().scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(x.grad(), at::ones({2, n}, at::kFloat)));
  });
}

TEST(Functions, IndivisibleDimensionsAreSentences) {
  run([](const Group& g, int, int n) {
    if (n == 1) return;
    at::Tensor x = filled({n + 1, 2}, 0.0);
    try {
      split_along_dim(x, g, 0);
      ADD_FAILURE() << "split a dimension of " << n + 1 << " over " << n << " ranks";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "split_along_dim: dimension 0 has size " +
                                           std::to_string(n + 1) +
                                           ", not a multiple of the tp "
                                           "group's " +
                                           std::to_string(n) + " ranks");
    }
    EXPECT_THROW(sequence_to_heads(x.t(), g, 0, 1), Error);
    EXPECT_THROW(gather_along_dim(x, g, 2), Error);
    EXPECT_THROW(reduce_from_region(x.to(at::kComplexDouble), g), Error);
    expect_ledger(g, {});
  });
}

// One step of Megatron's tensor-parallel MLP (column- then row-parallel) on tp 2 × dp 2, then
// the data-parallel sum of a weight gradient: the outputs and gradients match the full model,
// and the mesh's ledger holds exactly one all-reduce forward and one backward on tp, then one
// on dp, each of the tensor's bytes.
TEST(MeshLedger, CountsAStepPerGroup) {
  ThreadJob job(4);
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& world) {
    Mesh mesh(world, {.degrees = {.tp = 2}});
    mesh.ledger()->enable();
    const int t = mesh.coordinates().tp;
    const at::Tensor a = filled({4, 6}, 2.0), b = filled({6, 4}, 3.0);  // full weights
    at::Tensor x = filled({3, 4}, 1.0 + mesh.coordinates().dp).requires_grad_();
    at::Tensor a_t = slice(a, 2, t, 1).clone().requires_grad_();
    at::Tensor b_t = slice(b, 2, t, 0).clone().requires_grad_();
    at::Tensor y =
        reduce_from_region(copy_to_region(x, mesh.tp()).matmul(a_t).tanh().matmul(b_t), mesh.tp());
    y.sum().backward();
    at::Tensor xf = x.detach().clone().requires_grad_();
    at::Tensor af = a.clone().requires_grad_(), bf = b.clone().requires_grad_();
    at::Tensor yf = xf.matmul(af).tanh().matmul(bf);
    yf.sum().backward();
    expect_close(y, yf, "output");
    expect_close(x.grad(), xf.grad(), "input gradient");
    expect_close(a_t.grad(), slice(af.grad(), 2, t, 1), "column-parallel weight gradient");
    expect_close(b_t.grad(), slice(bf.grad(), 2, t, 0), "row-parallel weight gradient");
    reduce_from_region(a_t.grad(), mesh.dp());
    const std::vector<LedgerEntry> expected = {{"tp", CollectiveKind::AllReduce, 12 * kDouble},
                                               {"tp", CollectiveKind::AllReduce, 12 * kDouble},
                                               {"dp", CollectiveKind::AllReduce, 12 * kDouble}};
    EXPECT_EQ(mesh.ledger()->entries(), expected) << describe(mesh.ledger()->entries());
    EXPECT_EQ(mesh.ledger()->totals().at({"tp", CollectiveKind::AllReduce}),
              (LedgerTotal{2, 24 * kDouble}));
  });
}

}  // namespace
}  // namespace chorus::train
