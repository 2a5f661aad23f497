// The tiny fp64 GPT the model tests share: heads 12, so that t = 1, 2, 3 and 4 divide them;
// sequence 12, a multiple of every t (sequence parallelism splits it); batch 2.
#pragma once

#include <chorus/train/gpt.hpp>

#include "../tensor_parallel/tp_test_util.hpp"

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

namespace chorus::train::tiny_gpt {

inline constexpr std::int64_t kLayers = 2, kHidden = 24, kHeads = 12, kSeq = 12, kBatch = 2;
inline constexpr double kStd = 0.3;

inline GptConfig config(std::int64_t vocab, std::uint64_t seed, bool sequence_parallel) {
  return {.layers = kLayers,
          .hidden = kHidden,
          .heads = kHeads,
          .vocab = vocab,
          .sequence = kSeq,
          .sequence_parallel = sequence_parallel,
          .seed = seed,
          .init_std = kStd,
          .dtype = at::kDouble};
}

/// [kSeq, kBatch] token ids (i * 7 + 3) mod vocab, and the targets (i * 5 + 1) mod vocab.
inline at::Tensor tokens(std::int64_t vocab) {
  return (at::arange(kSeq * kBatch, at::kLong) * 7 + 3).remainder(vocab).view({kSeq, kBatch});
}
inline at::Tensor targets(std::int64_t vocab) {
  return (at::arange(kSeq * kBatch, at::kLong) * 5 + 1).remainder(vocab).view({kSeq, kBatch});
}

/// This rank's parameters, tp shards reassembled, the embedding's padded rows (beyond `vocab`)
/// dropped.
inline std::map<std::string, at::Tensor> whole_parameters(const GptModel& model,
                                                          std::int64_t vocab) {
  std::map<std::string, at::Tensor> out;
  for (const GptParameter& p : model.named_parameters()) {
    const at::Tensor local = p.tensor.detach();
    const at::Tensor full =
        p.shard_dim < 0 ? local : tp_test::reassembled(model.tp(), local, p.shard_dim);
    out[p.name] = p.name == "embedding.weight" ? full.narrow(0, 0, vocab) : full;
  }
  return out;
}

}  // namespace chorus::train::tiny_gpt
