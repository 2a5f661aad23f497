// The GPT's dropout masks; see gpt_dropout.hpp.
#include "gpt_dropout.hpp"

#include <chorus/train/random.hpp>

#include <ATen/ATen.h>

namespace chorus::train::detail {
namespace {

DropoutKey key_of(const DropoutPlan& plan, std::int64_t layer, GptDropoutSite site) {
  return {.seed = plan.seed,
          .step = plan.step,
          .micro_batch = plan.micro_batch,
          .layer = static_cast<std::uint64_t>(layer),
          .site = static_cast<std::uint64_t>(site)};
}

}  // namespace

at::Tensor hidden_dropout(const at::Tensor& x, const DropoutPlan& plan, std::int64_t layer,
                          GptDropoutSite site, const SequenceRows& sequence) {
  if (plan.p == 0) return x;
  const std::int64_t rows = x.size(0), samples = x.size(1);
  // [samples, s, h] from the first sample; this piece's samples and rows, then [rows, b, h].
  const at::Tensor mask = dropout_mask(
      key_of(plan, layer, site), plan.p, {plan.first_sample + samples, sequence.full, x.size(2)},
      {{0, plan.first_sample, samples}, {1, sequence.offset, rows}}, x.scalar_type());
  return x * mask.permute({1, 0, 2});
}

at::Tensor attention_dropout(const at::Tensor& probabilities, const DropoutPlan& plan,
                             std::int64_t layer, std::int64_t first_head, std::int64_t heads) {
  if (plan.p == 0) return probabilities;
  const std::int64_t samples = probabilities.size(0), here = probabilities.size(1);
  const std::int64_t queries = probabilities.size(2), keys = probabilities.size(3);
  const at::Tensor mask = dropout_mask(key_of(plan, layer, GptDropoutSite::Probabilities), plan.p,
                                       {plan.first_sample + samples, heads, queries, keys},
                                       {{0, plan.first_sample, samples}, {1, first_head, here}},
                                       probabilities.scalar_type());
  return probabilities * mask;
}

}  // namespace chorus::train::detail
