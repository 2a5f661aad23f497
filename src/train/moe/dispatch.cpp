// Dispatch and combine over the expert group; see include/chorus/train/moe.hpp.
//
// The kept assignments are sorted by expert, and rank d of ep holds experts
// [d·E/ep, (d+1)·E/ep), so the rows for rank d are one contiguous block: the send buffer is
// x[token] in routing order, with no further permutation. Rank s's block arriving at rank d is
// itself sorted by d's local experts; regrouping the received rows expert-major (by_expert)
// gives each local expert one contiguous block of rows from every source, one matmul each.
// Combine undoes each step in reverse order: by_source, the reverse all-to-all-v, and the
// gated sum per token (index_add, whose adjoint is dispatch's gather x[token]).
#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>
#include <chorus/train/autograd.hpp>
#include <chorus/train/moe.hpp>

#include <ATen/ATen.h>

#include <numeric>
#include <string>

namespace chorus::train {

namespace {

/// recv[s][e]: rows source s sends for local expert e, from one all_to_all of the counts.
at::Tensor exchange_counts(const MoeRouting& routing, std::int64_t local, const Group& ep) {
  const at::Tensor kept = at::tensor(routing.kept, at::kLong).reshape({ep.size(), local});
  return detail::all_to_all_along(ep, kept, 0, 0, "plan_dispatch");
}

/// The expert-major order of received rows: for each local expert, each source's block.
at::Tensor expert_major_order(const at::Tensor& recv) {
  const std::int64_t sources = recv.size(0), local = recv.size(1);
  const auto count = recv.accessor<std::int64_t, 2>();
  std::vector<std::int64_t> start(sources * local);
  std::int64_t next = 0;
  for (std::int64_t s = 0; s < sources; ++s)
    for (std::int64_t e = 0; e < local; ++e) {
      start[s * local + e] = next;
      next += count[s][e];
    }
  std::vector<std::int64_t> order;
  order.reserve(next);
  for (std::int64_t e = 0; e < local; ++e)
    for (std::int64_t s = 0; s < sources; ++s)
      for (std::int64_t i = 0; i < count[s][e]; ++i) order.push_back(start[s * local + e] + i);
  return at::tensor(order, at::kLong);
}

std::vector<std::int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

}  // namespace

DispatchPlan plan_dispatch(const MoeRouting& routing, std::int64_t experts, const Group& ep) {
  require_argument(experts > 0 && experts % ep.size() == 0,
                   "MoE: " + std::to_string(experts) + " experts are not a multiple of the " +
                       ep.name + " group's " + std::to_string(ep.size()) + " ranks");
  require_argument(static_cast<std::int64_t>(routing.kept.size()) == experts,
                   "plan_dispatch: the routing counts " + std::to_string(routing.kept.size()) +
                       " experts, not " + std::to_string(experts));
  const std::int64_t local = experts / ep.size();
  const at::Tensor sent = at::tensor(routing.kept, at::kLong).reshape({ep.size(), local});
  const at::Tensor recv = exchange_counts(routing, local, ep);
  DispatchPlan plan;
  plan.send_rows = to_vector(sent.sum(1));
  plan.recv_rows = to_vector(recv.sum(1));
  plan.expert_rows = to_vector(recv.sum(0));
  plan.by_expert = expert_major_order(recv);
  plan.by_source = at::empty_like(plan.by_expert);
  plan.by_source.index_put_({plan.by_expert}, at::arange(plan.by_expert.numel(), at::kLong));
  return plan;
}

at::Tensor moe_dispatch(const at::Tensor& x, const MoeRouting& routing, const DispatchPlan& plan,
                        const Group& ep) {
  require_argument(x.dim() == 2, "moe_dispatch: x must be [tokens, hidden], got " +
                                     std::to_string(x.dim()) + " dimensions");
  const at::Tensor rows = x.index_select(0, routing.token);
  const at::Tensor received = all_to_all_v_rows(rows, ep, plan.send_rows, plan.recv_rows);
  return received.index_select(0, plan.by_expert);
}

at::Tensor moe_combine(const at::Tensor& y, const MoeRouting& routing, const DispatchPlan& plan,
                       const Group& ep, std::int64_t tokens) {
  const std::int64_t expected =
      std::accumulate(plan.recv_rows.begin(), plan.recv_rows.end(), std::int64_t{0});
  require_argument(y.dim() == 2 && y.size(0) == expected,
                   "moe_combine: the expert outputs must be [" + std::to_string(expected) +
                       ", hidden], got " + std::to_string(y.dim() == 0 ? 0 : y.size(0)) + " rows");
  const at::Tensor by_source = y.index_select(0, plan.by_source);
  const at::Tensor back = all_to_all_v_rows(by_source, ep, plan.recv_rows, plan.send_rows);
  const at::Tensor gated = back * routing.gate.unsqueeze(1).to(back.scalar_type());
  return at::zeros({tokens, y.size(1)}, y.options()).index_add(0, routing.token, gated);
}

}  // namespace chorus::train
