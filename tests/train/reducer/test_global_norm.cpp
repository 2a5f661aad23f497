// The replication-aware global gradient norm (threads as ranks): tensor-parallel shards summed,
// replicated tensors counted once, pipeline stages summed, data-parallel replicas agreeing;
// always the norm of the full one-process gradient.
#include "reducer_test_util.hpp"

#include <chorus/error.hpp>

#include <cmath>

namespace chorus::train::reducer_test {
namespace {

/// The full one-process gradients of pipeline stage `stage`: a row-sharded weight [6, 4], a
/// replicated bias [4] and a column-sharded weight [3, 6].
std::vector<at::Tensor> full_grads(int stage) {
  return {filled({6, 4}, 0.3 + stage), filled({4}, 1.1 + stage), filled({3, 6}, 2.9 + stage)};
}

/// sqrt of the sum of squares of every stage's full gradients.
double full_norm(int stages) {
  double sq = 0;
  for (int s = 0; s < stages; ++s) {
    for (const at::Tensor& g : full_grads(s)) sq += g.pow(2).sum().item<double>();
  }
  return std::sqrt(sq);
}

/// This rank's pieces of its stage's gradients: shards over tp, the bias whole; `pp` adds the
/// placement over the pipeline group (every stage holds different tensors: Sharded).
std::vector<NormPiece> pieces_of(const Mesh& mesh, bool pp) {
  const int t = mesh.layout().tp;
  const int r = mesh.coordinates().tp;
  const std::vector<at::Tensor> full = full_grads(mesh.coordinates().pp);
  const auto place = [pp](GradPlacement over_tp) {
    std::vector<GradPlacement> out{over_tp};
    if (pp) out.push_back(GradPlacement::Sharded);
    return out;
  };
  return {{tp_test::slice(full[0], t, r, 0).clone(), place(GradPlacement::Sharded)},
          {full[1].clone(), place(GradPlacement::Replicated)},
          {tp_test::slice(full[2], t, r, 1).clone(), place(GradPlacement::Sharded)}};
}

TEST(GlobalGradNorm, ShardedAndReplicatedOverTensorParallelRanks) {
  for (int t = 1; t <= 3; ++t) {
    on_mesh(t, {.tp = t}, [](Mesh& mesh) {
      const double norm = global_grad_norm(pieces_of(mesh, false), {mesh.tp()});
      EXPECT_NEAR(norm, full_norm(1), 1e-12 * full_norm(1));
      std::vector<LedgerEntry> want;
      if (mesh.tp().size() > 1) want.push_back({"tp", CollectiveKind::AllReduce, 8});
      EXPECT_EQ(mesh.ledger()->take(), want);
    });
  }
}

// pp 2 × dp 2 × tp 2: each stage's pieces summed over tp and pp; both data-parallel replicas
// obtain the same norm without reducing over dp.
TEST(GlobalGradNorm, TensorAndPipelineParallelWithReplicas) {
  on_mesh(8, {.pp = 2, .dp = 2, .tp = 2}, [](Mesh& mesh) {
    const double norm = global_grad_norm(pieces_of(mesh, true), {mesh.tp(), mesh.pp()});
    EXPECT_NEAR(norm, full_norm(2), 1e-12 * full_norm(2));
    const std::vector<LedgerEntry> want{{"tp", CollectiveKind::AllReduce, 8},
                                        {"pp", CollectiveKind::AllReduce, 8}};
    EXPECT_EQ(mesh.ledger()->take(), want);
  });
}

TEST(GlobalGradNorm, ClippingScalesEveryPieceToTheMaximum) {
  on_mesh(2, {.tp = 2}, [](Mesh& mesh) {
    std::vector<NormPiece> pieces = pieces_of(mesh, false);
    const double max_norm = 0.5 * full_norm(1);
    EXPECT_NEAR(clip_grad_norm(pieces, {mesh.tp()}, max_norm), full_norm(1), 1e-12 * full_norm(1));
    EXPECT_NEAR(global_grad_norm(pieces, {mesh.tp()}), max_norm, 1e-5 * max_norm);
    // Below the maximum nothing changes.
    const at::Tensor before = pieces[0].grad.clone();
    clip_grad_norm(pieces, {mesh.tp()}, 10 * full_norm(1));
    EXPECT_TRUE(torch::equal(before, pieces[0].grad));
    EXPECT_THROW(clip_grad_norm(pieces, {mesh.tp()}, 0), Error);
    EXPECT_THROW(global_grad_norm({{pieces[0].grad, {}}}, {mesh.tp()}), Error);
  });
}

}  // namespace
}  // namespace chorus::train::reducer_test
