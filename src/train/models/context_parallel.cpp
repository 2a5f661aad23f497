// Ulysses context parallelism inside the GPT model; see context_parallel.hpp.
#include "context_parallel.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>
#include <chorus/train/autograd.hpp>

#include <ATen/ATen.h>

#include <string>

namespace chorus::train::detail {
namespace {

constexpr std::int64_t kSequenceDim = 0, kHeadsDim = 2;

std::string number(std::int64_t v) { return std::to_string(v); }

}  // namespace

at::Tensor ContextSplit::local_rows(const at::Tensor& x) const {
  if (!split()) return x;
  const std::int64_t s = x.size(kSequenceDim), u = size();
  require_argument(s % u == 0, "GptModel (context parallel): a sequence of " + number(s) +
                                   " tokens is not a multiple of the cp group's " + number(u) +
                                   " ranks");
  return x.narrow(kSequenceDim, first_row(s), s / u);
}

at::Tensor ContextSplit::to_heads(const at::Tensor& x) const {
  return split() ? sequence_to_heads(x, *cp_, kSequenceDim, kHeadsDim) : x;
}

at::Tensor ContextSplit::to_sequence(const at::Tensor& x) const {
  return split() ? heads_to_sequence(x, *cp_, kSequenceDim, kHeadsDim) : x;
}

at::Tensor ContextSplit::mean(const at::Tensor& per_token) const {
  if (!split()) return per_token.mean();
  const double tokens = static_cast<double>(per_token.numel()) * size();
  return reduce_from_region(per_token.sum() / tokens, *cp_);
}

void ContextSplit::sum(at::Tensor& value) const {
  if (split()) value = all_reduce_sum(*cp_, value.detach());
}

void check_context_parallel(const GptConfig& c, int t, int u) {
  if (u == 1) return;
  require_argument((c.heads / t) % u == 0, "GptModel (context parallel): heads " + number(c.heads) +
                                               " / tp " + number(t) + " = " + number(c.heads / t) +
                                               " per rank is not a multiple of the cp group's " +
                                               number(u) + " ranks");
  if (!c.sequence_parallel) {
    require_argument(c.sequence % u == 0,
                     "GptModel (context parallel): sequence " + number(c.sequence) +
                         " is not a multiple of the cp group's " + number(u) + " ranks");
    return;
  }
  require_argument(c.sequence % (t * u) == 0,
                   "GptModel (context and sequence parallel): sequence " + number(c.sequence) +
                       " is not a multiple of tp " + number(t) + " · cp " + number(u) + " = " +
                       number(t * u) + " ranks");
}

}  // namespace chorus::train::detail
