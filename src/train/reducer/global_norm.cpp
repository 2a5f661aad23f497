// The replication-aware global gradient norm and clipping; see reducer.hpp.
#include <chorus/error.hpp>
#include <chorus/train/reducer.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <string>

namespace chorus::train {
namespace {

/// True when this rank counts `piece`: it is rank 0 of every group the piece is replicated
/// over, so each logical element is counted by exactly one rank of the groups' product.
bool counted_here(const NormPiece& piece, const std::vector<Group>& groups) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (piece.placements[g] == GradPlacement::Replicated && groups[g].rank() != 0) return false;
  }
  return true;
}

}  // namespace

double global_grad_norm(const std::vector<NormPiece>& pieces, const std::vector<Group>& groups) {
  at::NoGradGuard no_grad;
  double sq = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const NormPiece& piece = pieces[i];
    require_argument(piece.placements.size() == groups.size(),
                     "global_grad_norm: piece " + std::to_string(i) + " has " +
                         std::to_string(piece.placements.size()) + " placement(s) for " +
                         std::to_string(groups.size()) + " group(s)");
    if (piece.grad.defined() && counted_here(piece, groups)) {
      sq += piece.grad.to(at::kDouble).pow(2).sum().item<double>();
    }
  }
  for (const Group& group : groups) {
    if (group.size() == 1) continue;
    group.record(CollectiveKind::AllReduce, sizeof(double));
    Communicator comm = group.comm;
    comm.all_reduce(&sq, &sq, 1, DataType::Float64, ReduceOp::Sum);
  }
  return std::sqrt(sq);
}

double clip_grad_norm(const std::vector<NormPiece>& pieces, const std::vector<Group>& groups,
                      double max_norm) {
  require_argument(max_norm > 0,
                   "clip_grad_norm: max_norm " + std::to_string(max_norm) + " must be positive");
  const double norm = global_grad_norm(pieces, groups);
  const double coef = max_norm / (norm + 1e-6);  // PyTorch's clip_grad_norm_ rule
  if (coef < 1.0) {
    at::NoGradGuard no_grad;
    for (const NormPiece& piece : pieces) {
      if (piece.grad.defined()) at::Tensor(piece.grad).mul_(coef);
    }
  }
  return norm;
}

}  // namespace chorus::train
