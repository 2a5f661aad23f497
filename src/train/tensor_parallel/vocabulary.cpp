// The vocabulary-parallel embedding and cross-entropy; see tensor_parallel.hpp.
//
// Cross-entropy without gathering the logits (Megatron): with m = max_v z_v over the whole
// vocabulary (an all-reduce max), loss = log Σ_v exp(z_v − m) − (z_target − m), where each rank
// sums exp over its own columns (an all-reduce sum) and only the rank that holds the target
// contributes z_target − m (an all-reduce sum of per-rank values that are zero elsewhere). The
// gradient, softmax(z) − onehot(target), needs only the rank's own columns: no collective.
// Padded columns are set to −inf before the max, so exp gives them 0: zero probability, zero
// gradient, whatever values they held.
#include "../autograd/tensor_collectives.hpp"
#include "parameters.hpp"

#include <chorus/error.hpp>
#include <chorus/train/autograd.hpp>
#include <chorus/train/random.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <string>

namespace chorus::train {

std::int64_t padded_vocab(std::int64_t vocab, int ranks) {
  require_argument(vocab >= 1 && ranks >= 1, "padded_vocab: vocabulary " + std::to_string(vocab) +
                                                 " over " + std::to_string(ranks) + " ranks");
  return (vocab + ranks - 1) / ranks * ranks;
}

VocabRange vocab_range(std::int64_t vocab, int rank, int ranks) {
  const std::int64_t length = padded_vocab(vocab, ranks) / ranks;
  require_argument(rank >= 0 && rank < ranks, "vocab_range: rank " + std::to_string(rank) +
                                                  " outside a group of " + std::to_string(ranks));
  const std::int64_t start = rank * length;
  return {start, length, std::clamp<std::int64_t>(vocab - start, 0, length)};
}

namespace {

/// InvalidArgument unless `tokens` are int64 in [0, vocab).
void require_ids(const char* what, const at::Tensor& tokens, std::int64_t vocab) {
  require_argument(tokens.defined() && tokens.scalar_type() == at::kLong,
                   std::string(what) + ": token ids must be an int64 tensor");
  if (tokens.numel() == 0) return;
  const std::int64_t low = tokens.min().item<std::int64_t>();
  const std::int64_t high = tokens.max().item<std::int64_t>();
  require_argument(low >= 0 && high < vocab, std::string(what) + ": token ids span [" +
                                                 std::to_string(low) + ", " + std::to_string(high) +
                                                 "], outside the vocabulary of " +
                                                 std::to_string(vocab));
}

/// Whether each id falls in the range's real ids, and the ids made local (0 where not).
std::pair<at::Tensor, at::Tensor> local_ids(const at::Tensor& ids, const VocabRange& range) {
  const at::Tensor mine = (ids >= range.start) & (ids < range.start + range.real);
  return {mine, (ids - range.start).masked_fill(~mine, 0)};
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, const Group& g, std::int64_t vocab) {
    const VocabRange range = vocab_range(vocab, g.rank(), g.size());
    at::Tensor z = logits.clone(at::MemoryFormat::Contiguous);
    z.narrow(-1, range.real, range.length - range.real)
        .fill_(-std::numeric_limits<double>::infinity());
    const at::Tensor max = detail::all_reduce(g, z.amax(-1), ReduceOp::Max);
    const at::Tensor shifted = z - max.unsqueeze(-1);
    const auto [mine, local] = local_ids(targets, range);
    const at::Tensor own_target =
        shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(~mine, 0);
    const at::Tensor target = detail::all_reduce_sum(g, own_target);
    const at::Tensor exp = shifted.exp();
    const at::Tensor sum_exp = detail::all_reduce_sum(g, exp.sum(-1));
    const at::Tensor one_hot = at::zeros_like(exp).scatter_(
        -1, local.unsqueeze(-1), mine.unsqueeze(-1).to(exp.scalar_type()));
    ctx->save_for_backward({exp / sum_exp.unsqueeze(-1) - one_hot});
    return sum_exp.log() - target;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor softmax_minus_target = ctx->get_saved_variables()[0];
    return {softmax_minus_target * grads[0].unsqueeze(-1), {}, {}, {}};
  }
};

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(std::int64_t vocab, std::int64_t hidden,
                                               const Group& tp, const ParameterInit& init,
                                               const EmbeddingOptions& options)
    : vocab_(vocab), tp_(tp), options_(options), range_(vocab_range(vocab, tp.rank(), tp.size())) {
  detail::require_features("VocabParallelEmbedding", "hidden", hidden, 1);
  weight_ = at::zeros({range_.length, hidden}, at::TensorOptions().dtype(init.dtype));
  if (range_.real > 0) {
    at::Tensor real = detail::weight_slice(init, {vocab, hidden}, 0, range_.start, range_.real);
    weight_.narrow(0, 0, range_.real).copy_(real.detach());
  }
  weight_.set_requires_grad(true);
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& tokens) const {
  require_ids("VocabParallelEmbedding", tokens, vocab_);
  const auto [mine, local] = local_ids(tokens, range_);
  const at::Tensor partial = at::embedding(weight_, local).masked_fill(~mine.unsqueeze(-1), 0);
  return options_.sequence_parallel ? reduce_scatter_along_dim(partial, tp_, options_.sequence_dim)
                                    : reduce_from_region(partial, tp_);
}

at::Tensor VocabParallelEmbedding::logits(const at::Tensor& hidden) const {
  detail::require_last_dim("VocabParallelEmbedding::logits", hidden, weight_.size(1));
  const at::Tensor input =
      detail::column_parallel_input(hidden, tp_, options_.sequence_parallel, options_.sequence_dim);
  return at::linear(input, weight_);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        const Group& tp, std::int64_t vocab) {
  const char* what = "vocab_parallel_cross_entropy";
  const std::int64_t width = padded_vocab(vocab, tp.size()) / tp.size();
  detail::require_last_dim(what, logits, width);
  require_argument(logits.is_floating_point(),
                   std::string(what) + ": logits of type " +
                       std::string(c10::toString(logits.scalar_type())) + ", not floating point");
  require_ids(what, targets, vocab);
  require_argument(targets.sizes() == logits.sizes().slice(0, logits.dim() - 1),
                   std::string(what) + ": targets of shape " + c10::str(targets.sizes()) +
                       " for logits of shape " + c10::str(logits.sizes()));
  // A half-precision softmax over the vocabulary would keep about 3 digits of the loss.
  const bool half = logits.scalar_type() == at::kBFloat16 || logits.scalar_type() == at::kHalf;
  return VocabParallelCrossEntropy::apply(half ? logits.to(at::kFloat) : logits, targets, tp,
                                          vocab);
}

}  // namespace chorus::train
