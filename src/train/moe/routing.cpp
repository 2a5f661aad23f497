// Top-k routing with capacity and the load-balancing loss; see include/chorus/train/moe.hpp.
//
// The decisions (which assignment an expert keeps) are integer bookkeeping on the detached
// probabilities; the gates stay in the autograd graph: gate = p (k = 1) or p / (p_1 + p_2)
// (k = 2), indexed at the kept assignments, so the router learns through every kept gate.
#include "routing_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/moe.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

namespace chorus::train {

namespace {

/// One top-k choice of one token.
struct Assignment {
  double prob = 0;
  std::int64_t token = 0;
  std::int64_t slot = 0;  ///< 0 for the best expert, 1 for the second
};

/// Higher probability first, then the lower token index: the order an expert keeps them in.
bool keeps_before(const Assignment& a, const Assignment& b) {
  return a.prob != b.prob ? a.prob > b.prob : a.token < b.token;
}

/// `value` as text without trailing zeros ("1.25", "0", "-1").
std::string shortest(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::int64_t group_size(std::int64_t tokens, std::int64_t group_tokens) {
  return group_tokens == 0 ? tokens : group_tokens;
}

/// The top-k choices of every token: probability (fp64) and expert of slot s of token t at
/// t·k + s.
struct Choices {
  at::Tensor prob, expert;
  std::int64_t k = 1;
};

/// Routes tokens [first, first + group): each expert keeps at most `capacity` of the
/// assignments it was chosen for (keeps_before's order), appended per expert as t·k + slot in
/// token order; counts added to routing.routed and routing.kept.
void keep_group(const Choices& c, std::int64_t first, std::int64_t group, std::int64_t capacity,
                MoeRouting& routing, std::vector<std::vector<std::int64_t>>& kept) {
  const double* prob = c.prob.data_ptr<double>();
  const std::int64_t* expert = c.expert.data_ptr<std::int64_t>();
  std::vector<std::vector<Assignment>> wanted(kept.size());
  for (std::int64_t t = first; t < first + group; ++t)
    for (std::int64_t s = 0; s < c.k; ++s)
      wanted[expert[t * c.k + s]].push_back({prob[t * c.k + s], t, s});
  for (std::size_t x = 0; x < wanted.size(); ++x) {
    std::vector<Assignment>& list = wanted[x];
    routing.routed[x] += static_cast<std::int64_t>(list.size());
    std::sort(list.begin(), list.end(), keeps_before);
    if (static_cast<std::int64_t>(list.size()) > capacity) list.resize(capacity);
    std::sort(list.begin(), list.end(),
              [](const Assignment& a, const Assignment& b) { return a.token < b.token; });
    for (const Assignment& a : list) kept[x].push_back(a.token * c.k + a.slot);
    routing.kept[x] += static_cast<std::int64_t>(list.size());
  }
}

}  // namespace

void detail::check_routing_options(const MoeRoutingOptions& o, std::int64_t experts) {
  require_argument(o.top_k == 1 || o.top_k == 2,
                   "MoE: top_k " + std::to_string(o.top_k) + " is not 1 or 2");
  require_argument(o.top_k <= experts, "MoE: top_k " + std::to_string(o.top_k) +
                                           " exceeds the number of experts " +
                                           std::to_string(experts));
  require_argument(o.dropless || o.capacity_factor > 0,
                   "MoE: capacity factor " + shortest(o.capacity_factor) +
                       " is not positive (use dropless for no capacity)");
  require_argument(o.group_tokens >= 0,
                   "MoE: group_tokens " + std::to_string(o.group_tokens) + " is negative");
}

std::int64_t expert_capacity(std::int64_t tokens, int top_k, double capacity_factor,
                             std::int64_t experts) {
  const double exact = static_cast<double>(tokens) * top_k * capacity_factor / experts;
  return static_cast<std::int64_t>(std::ceil(exact));
}

MoeRouting route_tokens(const at::Tensor& probs, const MoeRoutingOptions& o) {
  require_argument(probs.dim() == 2, "route_tokens: probs must be [tokens, experts], got " +
                                         std::to_string(probs.dim()) + " dimensions");
  detail::check_routing_options(o, probs.size(1));
  require_argument(o.group_tokens == 0 || probs.size(0) % o.group_tokens == 0,
                   "MoE: " + std::to_string(probs.size(0)) +
                       " tokens are not a multiple of group_tokens " +
                       std::to_string(o.group_tokens));
  const std::int64_t tokens = probs.size(0), experts = probs.size(1), k = o.top_k;
  auto [top_prob, top_expert] = at::topk(probs, k, 1, /*largest=*/true, /*sorted=*/true);
  const at::Tensor gates = k == 1 ? top_prob : top_prob / top_prob.sum(1, true);
  MoeRouting out;
  out.topk_expert = top_expert.contiguous();
  const Choices choices{top_prob.detach().to(at::kDouble).contiguous(), out.topk_expert, k};
  out.routed.assign(experts, 0);
  out.kept.assign(experts, 0);
  std::vector<std::vector<std::int64_t>> kept(experts);  // t·k + slot, per expert
  const std::int64_t group = group_size(tokens, o.group_tokens);
  const std::int64_t capacity =
      o.dropless ? tokens * k : expert_capacity(group, o.top_k, o.capacity_factor, experts);
  for (std::int64_t first = 0; first < tokens; first += group)
    keep_group(choices, first, group, capacity, out, kept);
  std::vector<std::int64_t> flat, expert_of;
  for (std::int64_t x = 0; x < experts; ++x) {
    flat.insert(flat.end(), kept[x].begin(), kept[x].end());
    expert_of.insert(expert_of.end(), kept[x].size(), x);
  }
  const at::Tensor index = at::tensor(flat, at::kLong);
  out.token = at::div(index, k, "floor");
  out.expert = at::tensor(expert_of, at::kLong);
  out.gate = gates.reshape({-1}).index_select(0, index);
  return out;
}

at::Tensor load_balancing_loss(const at::Tensor& probs, const MoeRouting& routing,
                               std::int64_t group_tokens, double alpha) {
  const std::int64_t tokens = probs.size(0), experts = probs.size(1);
  if (tokens == 0) return at::zeros({}, probs.options());
  const std::int64_t group = group_size(tokens, group_tokens), groups = tokens / group;
  const std::int64_t k = routing.topk_expert.size(1);
  const at::Tensor mean_prob = probs.reshape({groups, group, experts}).mean(1);
  const at::Tensor sent = at::one_hot(routing.topk_expert.reshape({groups, group * k}), experts)
                              .sum(1)
                              .to(probs.scalar_type());
  const at::Tensor fraction = sent / static_cast<double>(group * k);
  return alpha * static_cast<double>(experts) * (fraction * mean_prob).sum(1).mean();
}

}  // namespace chorus::train
