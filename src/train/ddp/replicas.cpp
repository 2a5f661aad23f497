// DistributedDataParallel's replicas: global-norm clipping of the synchronised gradients,
// replica verification and local-SGD parameter averaging.
#include "ddp_impl.hpp"

#include <chorus/error.hpp>

#include <cstring>

namespace chorus::train {
namespace {

/// 64-bit hash of a tensor's bytes: 8-byte words mixed FNV-style, then a final avalanche.
std::uint64_t hash_bytes(const torch::Tensor& t, std::uint64_t h) {
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  const std::size_t n = static_cast<std::size_t>(t.numel()) * t.element_size();
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    h = (h ^ word) * kPrime;
  }
  for (; i < n; ++i) h = (h ^ bytes[i]) * kPrime;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace

// After synchronisation every rank holds the same gradients: each is Replicated over the
// group, counted on its rank 0 only, so every rank obtains rank 0's norm. In local SGD each
// replica's gradients are its own: the norm is the replica's.
double DistributedDataParallel::Impl::clip_grad_norm(double max_norm) {
  std::vector<Group> groups;
  if (!local_sgd()) groups.push_back(reducer->group());
  std::vector<NormPiece> pieces;
  for (auto& p : params) {
    pieces.push_back(
        {p.grad(), std::vector<GradPlacement>(groups.size(), GradPlacement::Replicated)});
  }
  return train::clip_grad_norm(pieces, groups, max_norm);
}

bool DistributedDataParallel::Impl::verify_replicas() {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : params) h = hash_bytes(p.detach().contiguous(), h);
  for (const auto& b : buffers) h = hash_bytes(b.detach().contiguous(), h);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&h, all.data(), 1, DataType::Uint64);
  for (auto v : all) {
    if (v != all[0]) return false;
  }
  return true;
}

void DistributedDataParallel::Impl::average_parameters() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& p : params) flat_parts.push_back(p.detach().reshape(-1).to(torch::kFloat));
  if (flat_parts.empty()) return;
  auto flat = torch::cat(flat_parts);
  comm.all_reduce(flat.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                  DataType::Float32, ReduceOp::Avg);
  std::int64_t offset = 0;
  for (auto& p : params) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

}  // namespace chorus::train
