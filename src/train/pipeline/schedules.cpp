// The schedule generators of pipeline_schedule.hpp. Each builds every rank's computations in
// order; with_communication then places the sends and receives: a receive right before the
// computation that needs it, a send right after the computation that produced it (sends never
// block, so this order is deadlock-free whenever the computations' order is).
#include <chorus/error.hpp>
#include <chorus/train/pipeline_schedule.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <utility>

namespace chorus::train {
namespace {

using Op = PipelineOp;
using Actions = std::vector<PipelineAction>;

struct Step {
  int micro_batch;
  int chunk;
};

Actions gpipe(int m) {
  Actions out;
  for (int i = 0; i < m; ++i) out.push_back({Op::Forward, i, 0});
  for (int i = 0; i < m; ++i) out.push_back({Op::Backward, i, 0});
  return out;
}

/// 1F1B over the given forward and backward orders: `warmup` forwards, then forward/backward
/// pairs, then the remaining backwards.
Actions one_f_one_b(const std::vector<Step>& forward, const std::vector<Step>& backward,
                    std::size_t warmup) {
  warmup = std::min(warmup, forward.size());
  Actions out;
  for (std::size_t k = 0; k < warmup; ++k)
    out.push_back({Op::Forward, forward[k].micro_batch, forward[k].chunk});
  for (std::size_t k = 0; k + warmup < forward.size(); ++k) {
    out.push_back({Op::Forward, forward[warmup + k].micro_batch, forward[warmup + k].chunk});
    out.push_back({Op::Backward, backward[k].micro_batch, backward[k].chunk});
  }
  for (std::size_t k = forward.size() - warmup; k < backward.size(); ++k)
    out.push_back({Op::Backward, backward[k].micro_batch, backward[k].chunk});
  return out;
}

std::vector<Step> in_order(int m) {
  std::vector<Step> out;
  for (int i = 0; i < m; ++i) out.push_back({i, 0});
  return out;
}

/// Interleaving's groups: m / p groups of p consecutive micro-batches, the first taking the
/// m mod p extra ones (a group smaller than p would leave the first rank waiting for its
/// first micro-batch to come round again; a larger one does not).
std::vector<std::pair<int, int>> groups(int p, int m) {
  const int count = m / p, extra = m % p;
  std::vector<std::pair<int, int>> out;  // [first, size)
  for (int g = 0, first = 0; g < count; ++g) {
    const int size = p + (g == 0 ? extra : 0);
    out.emplace_back(first, size);
    first += size;
  }
  return out;
}

Actions interleaved(int p, int v, int m, int rank) {
  std::vector<Step> forward, backward;
  const auto order = groups(p, m);
  for (const auto& [first, size] : order) {
    for (int c = 0; c < v; ++c)
      for (int i = first; i < first + size; ++i) forward.push_back({i, c});
    for (int c = v - 1; c >= 0; --c)
      for (int i = first; i < first + size; ++i) backward.push_back({i, c});
  }
  const int warmup = 2 * (p - rank - 1) + (v - 1) * order.front().second;
  return one_f_one_b(forward, backward, static_cast<std::size_t>(warmup));
}

/// 1F1B with split backwards; rank r defers up to r weight gradients.
Actions zero_bubble_h1(int p, int m, int rank) {
  Actions out;
  std::deque<int> pending;
  const auto input_gradient = [&](int i) {
    out.push_back({Op::BackwardInput, i, 0});
    pending.push_back(i);
    if (static_cast<int>(pending.size()) > rank) {
      out.push_back({Op::BackwardWeight, pending.front(), 0});
      pending.pop_front();
    }
  };
  const int warmup = std::min(p - rank - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({Op::Forward, i, 0});
  for (int k = 0; k + warmup < m; ++k) {
    out.push_back({Op::Forward, warmup + k, 0});
    input_gradient(k);
  }
  for (int k = m - warmup; k < m; ++k) input_gradient(k);
  for (int i : pending) out.push_back({Op::BackwardWeight, i, 0});
  return out;
}

/// `compute` (rank `r`'s computations) with the sends and receives to other ranks added.
Actions with_communication(const PipelineSchedule& s, int r, const Actions& compute) {
  const int p = s.stages(), last = s.virtual_stages() - 1;
  Actions out;
  for (const PipelineAction& a : compute) {
    const int stage = s.virtual_stage(r, a.chunk);
    const int prev = (r + p - 1) % p, next = (r + 1) % p;
    const bool from_prev = stage > 0 && p > 1, to_next = stage < last && p > 1;
    const bool backward = a.op == Op::Backward || a.op == Op::BackwardInput;
    if (a.op == Op::Forward && from_prev)
      out.push_back({Op::RecvActivation, a.micro_batch, a.chunk, prev});
    if (backward && to_next) out.push_back({Op::RecvGradient, a.micro_batch, a.chunk, next});
    out.push_back(a);
    if (a.op == Op::Forward && to_next)
      out.push_back({Op::SendActivation, a.micro_batch, a.chunk, next});
    if (backward && from_prev) out.push_back({Op::SendGradient, a.micro_batch, a.chunk, prev});
  }
  return out;
}

void check(const ScheduleOptions& o) {
  const std::string name(to_string(o.kind));
  const auto n = [](int v) { return std::to_string(v); };
  require_argument(o.stages >= 1 && o.micro_batches >= 1 && o.chunks >= 1,
                   "pipeline schedule " + name + ": stages " + n(o.stages) + ", micro-batches " +
                       n(o.micro_batches) + ", chunks " + n(o.chunks) + " must all be positive");
  if (o.kind != ScheduleKind::Interleaved) {
    require_argument(o.chunks == 1, "pipeline schedule " + name + ": " + n(o.chunks) +
                                        " chunks per rank; only interleaved takes more than 1");
    return;
  }
  require_argument(o.chunks >= 2, "pipeline schedule interleaved: " + n(o.chunks) +
                                      " chunk per rank; interleaving needs at least 2");
  require_argument(o.micro_batches >= o.stages,
                   "pipeline schedule interleaved: " + n(o.micro_batches) + " micro-batches for " +
                       n(o.stages) +
                       " stages; interleaving needs at least as many micro-batches "
                       "as stages");
}

}  // namespace

std::string_view to_string(PipelineOp op) noexcept {
  constexpr std::array<std::string_view, 8> names{
      "forward",         "backward",        "backward input", "backward weight",
      "send activation", "recv activation", "send gradient",  "recv gradient"};
  return names[static_cast<std::size_t>(op)];
}

std::string describe(const PipelineAction& a) {
  std::string out = std::string(to_string(a.op)) + " of micro-batch " +
                    std::to_string(a.micro_batch) + " on chunk " + std::to_string(a.chunk);
  const bool sends = a.op == Op::SendActivation || a.op == Op::SendGradient;
  if (a.peer >= 0) out += (sends ? " to rank " : " from rank ") + std::to_string(a.peer);
  return out;
}

std::string_view to_string(ScheduleKind kind) noexcept {
  constexpr std::array<std::string_view, 4> names{"gpipe", "1f1b", "interleaved", "zb-h1"};
  return names[static_cast<std::size_t>(kind)];
}

ScheduleKind schedule_kind(std::string_view name) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                         ScheduleKind::ZeroBubbleH1})
    if (to_string(k) == name) return k;
  throw Error(Status::InvalidArgument, "pipeline schedule '" + std::string(name) +
                                           "' is none of gpipe, 1f1b, interleaved, zb-h1");
}

PipelineSchedule make_schedule(const ScheduleOptions& options) {
  check(options);
  PipelineSchedule s{options, {}};
  const int p = options.stages, m = options.micro_batches;
  for (int r = 0; r < p; ++r) {
    Actions compute;
    switch (options.kind) {
      case ScheduleKind::GPipe:
        compute = gpipe(m);
        break;
      case ScheduleKind::OneFOneB:
        compute = one_f_one_b(in_order(m), in_order(m), static_cast<std::size_t>(p - r - 1));
        break;
      case ScheduleKind::Interleaved:
        compute = interleaved(p, options.chunks, m, r);
        break;
      case ScheduleKind::ZeroBubbleH1:
        compute = zero_bubble_h1(p, m, r);
        break;
    }
    s.ranks.push_back(with_communication(s, r, compute));
  }
  return s;
}

}  // namespace chorus::train
