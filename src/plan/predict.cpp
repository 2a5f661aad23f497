// The prediction of one layout (planner.hpp; the formulas are in docs/planner.md). All
// times are of the heaviest pipeline stage, per rank: its blocks, the embedding and the head
// (exact at pp 1, an upper bound on the middle stages otherwise).
#include "plan/planner.hpp"

#include <algorithm>

namespace chorus::plan {
namespace {

double d(std::int64_t value) { return static_cast<double>(value); }

/// Logits-sized tensors the head holds at its peak (memory(), below).
constexpr double kCrossEntropyLogits = 7;

/// The mesh groups of a layout (PARALLEL.md: pp, dp, cp, tp slowest to fastest; ep inside
/// dp * cp next to tp).
struct Groups {
  GroupShape tp, cp, ep, dp_cp, edp, pp;
  bool pp_across_hosts = false;
};

Groups groups_of(const Layout& l, int ranks_per_host) {
  Groups g;
  g.tp = group_shape(1, l.tp, ranks_per_host);
  g.cp = group_shape(l.tp, l.cp, ranks_per_host);
  g.ep = group_shape(l.tp, l.ep, ranks_per_host);
  g.dp_cp = group_shape(l.tp, l.dp * l.cp, ranks_per_host);
  g.edp = group_shape(l.tp * l.ep, l.dp * l.cp / l.ep, ranks_per_host);
  g.pp = group_shape(l.tp * l.cp * l.dp, l.pp, ranks_per_host);
  g.pp_across_hosts = g.pp.hosts > 1;
  return g;
}

/// One micro-batch on the heaviest stage: computation and the blocking communication of
/// each group, forward and backward.
struct MicroBatch {
  double forward = 0, backward = 0;  // computation
  double tp = 0, cp = 0, ep = 0, pp = 0;
  double total() const { return forward + backward + tp + cp + ep + pp; }
};

double tp_time(const PlanRequest& r, const Layout& l, const Groups& g, CollectiveCosts& c) {
  if (l.tp == 1) return 0;
  const ModelConfig& m = r.model;
  const double act =
      d(l.micro_batch) * d(m.seq) / l.cp * d(m.hidden) * r.machine.precision.activation;
  const double per_block = m.moe() ? 1 : 2;  // experts are whole: no tp collective around them
  const double blocks = d(stage_layers(m, l));
  const double full = l.recompute == Recompute::Full ? 1 : 0;
  const double tokens = d(l.micro_batch) * d(m.seq) / l.cp * 4;  // fp32 per token
  const double cross_entropy = 3 * c.all_reduce(tokens, g.tp);
  if (!l.sequence_parallel) {
    const double forward = per_block * blocks + 1, backward = per_block * blocks * (1 + full) + 1;
    return (forward + backward) * c.all_reduce(act, g.tp) + cross_entropy;
  }
  const double gathers =
      (per_block * blocks + 1) + (2 * per_block * blocks + 1) + full * per_block * blocks;
  const double scatters = 2 * (per_block * blocks + 1) + full * per_block * blocks;
  return gathers * c.all_gather(act, g.tp) + scatters * c.reduce_scatter(act, g.tp) + cross_entropy;
}

/// Bytes of one pipeline message: the boundary activation b·r·h (/t under SP).
double boundary_bytes(const PlanRequest& r, const Layout& l) {
  const double act =
      d(l.micro_batch) * d(r.model.seq) / l.cp * d(r.model.hidden) * r.machine.precision.activation;
  return l.sequence_parallel ? act / l.tp : act;
}

/// One pipeline message of `boundary` bytes (a stage's activation, or its gradient) between
/// the tp groups of consecutive stages.
double pipeline_message(const PlanRequest& r, const Layout& l, const Groups& g, double boundary,
                        CollectiveCosts& c) {
  if (!r.pipeline_scatter_gather || l.tp == 1 || l.sequence_parallel)
    return c.send(boundary, g.pp_across_hosts);
  return c.send(boundary / l.tp, g.pp_across_hosts) + c.all_gather(boundary, g.tp);
}

/// One micro-batch's computation on the heaviest stage from the machine's rate (peak ×
/// efficiency) and memory bandwidth.
void rated_compute(const PlanRequest& r, const Layout& l, MicroBatch& mb) {
  const ModelConfig& m = r.model;
  const Machine& machine = r.machine;
  const double blocks = d(stage_layers(m, l));
  const double block = block_forward_flops(m, l), head = head_forward_flops(m, l);
  mb.forward = (blocks * block + head) / machine.forward_flops_per_second();
  mb.backward = 2 * (blocks * block + head) / machine.backward_flops_per_second();
  const MemoryTraffic traffic = block_memory_traffic(m, l, machine.precision);
  mb.forward += blocks * machine.memory_seconds(traffic.forward);
  mb.backward += blocks * machine.memory_seconds(traffic.backward);
  if (l.recompute == Recompute::Selective) {
    mb.backward += blocks * (attention_core_flops(m, l) / machine.forward_flops_per_second() +
                             machine.memory_seconds(traffic.attention_forward));
  }
  if (l.recompute == Recompute::Full) {
    mb.backward += blocks * (block / machine.forward_flops_per_second() +
                             machine.memory_seconds(traffic.forward));
  }
}

/// What recomputation adds to a block's backward: measured (the recomputing backward's line
/// less the plain backward's), else the attention core's FLOPs and its share of the forward's
/// fixed time (selective) or a whole forward (full).
double recomputation(const ComputeModel& c, const ModelConfig& m, const Layout& l) {
  const double block = block_forward_flops(m, l), core = attention_core_flops(m, l);
  const double backward = c.block_backward.seconds(2 * block);
  if (l.recompute == Recompute::Selective) {
    if (c.selective_backward.measured())
      return std::max(0.0, c.selective_backward.seconds(2 * block + core) - backward);
    return kAttentionCoreFixedShare * c.block_forward.fixed + core * c.block_forward.per_unit;
  }
  if (l.recompute == Recompute::Full) {
    if (c.full_backward.measured())
      return std::max(0.0, c.full_backward.seconds(3 * block) - backward);
    return c.block_forward.seconds(block);
  }
  return 0;
}

/// One micro-batch's computation on the heaviest stage from a compute profile's fitted lines
/// (compute_model.hpp): each block's fixed time plus its FLOPs' time, the head's and the
/// embedding's lines when measured (a third of each forward, two thirds backward; an
/// unmeasured head runs at the blocks' rates), and recomputation's share.
void measured_compute(const PlanRequest& r, const Layout& l, MicroBatch& mb) {
  const ModelConfig& m = r.model;
  const ComputeModel& c = *r.machine.measured;
  const double blocks = d(stage_layers(m, l));
  const double block = block_forward_flops(m, l), head = head_forward_flops(m, l);
  mb.forward = blocks * c.block_forward.seconds(block);
  mb.backward = blocks * c.block_backward.seconds(2 * block);
  if (c.head.measured()) {
    const double both = c.head.seconds(3 * head);
    mb.forward += both / 3, mb.backward += 2 * both / 3;
  } else {
    mb.forward += head * c.block_forward.per_unit;
    mb.backward += 2 * head * c.block_backward.per_unit;
  }
  if (c.embedding.measured()) {
    const double both = c.embedding.seconds(embedding_elements(m, l));
    mb.forward += both / 3, mb.backward += 2 * both / 3;
  }
  mb.backward += blocks * recomputation(c, m, l);
}

MicroBatch micro_batch(const PlanRequest& r, const Layout& l, const Groups& g, CollectiveCosts& c) {
  const ModelConfig& m = r.model;
  const Machine& machine = r.machine;
  const double blocks = d(stage_layers(m, l));
  MicroBatch mb;
  if (machine.measured) {
    measured_compute(r, l, mb);
  } else {
    rated_compute(r, l, mb);
  }
  const double passes = l.recompute == Recompute::Full ? 3 : 2;  // forward, backward, again
  const double act =
      d(l.micro_batch) * d(m.seq) / l.cp * d(m.hidden) * machine.precision.activation;
  mb.tp = tp_time(r, l, g, c);
  // Ulysses: the fused QKV (3h/t) and the context (h/t) each way.
  mb.cp = passes * blocks * (c.all_to_all(3 * act / l.tp, g.cp) + c.all_to_all(act / l.tp, g.cp));
  if (m.moe()) {
    const double rows = (l.sequence_parallel ? act / l.tp : act) * d(m.top_k);
    mb.ep = passes * blocks * 2 * c.all_to_all(rows, g.ep);
  }
  if (l.pp > 1) mb.pp = 2 * l.virtual_stages * pipeline_message(r, l, g, boundary_bytes(r, l), c);
  return mb;
}

/// Parameters of the heaviest stage on one rank: dense (over dp * cp) and experts (over the
/// expert-data-parallel group).
BlockParameters stage_parameters(const ModelConfig& m, const Layout& l) {
  const BlockParameters block = block_parameters(m, l);
  const double blocks = d(stage_layers(m, l));
  return {blocks * block.dense + embedding_parameters(m, l) + 2 * d(m.hidden),
          blocks * block.experts};
}

/// ZeRO's shards: parameters, gradients and optimizer state of `psi` parameters over `ranks`.
MemoryUse model_states(double psi, double ranks, int zero, const Precision& p) {
  return {p.parameter * psi / (zero >= 3 ? ranks : 1), p.gradient * psi / (zero >= 2 ? ranks : 1),
          p.optimizer * psi / (zero >= 1 ? ranks : 1), 0, 0};
}

/// The optimizer's step on the rank's parameters (its shards under ZeRO), from a compute
/// profile's time per parameter.
double optimizer_time(const PlanRequest& r, const Layout& l) {
  if (!r.machine.measured) return 0;
  const BlockParameters psi = stage_parameters(r.model, l);
  const double replicas = l.zero >= 1 ? d(l.dp) * l.cp : 1;
  const double experts = l.zero >= 1 ? replicas / l.ep : 1;
  return r.machine.measured->optimizer_per_parameter *
         (psi.dense / replicas + psi.experts / experts);
}

/// Micro-batches (in stage-equivalents) whose activations stage 0 holds at once.
double in_flight(const Layout& l) {
  const double m = d(l.micro_batches), p = l.pp, v = l.virtual_stages;
  if (l.pp == 1) return 1;
  if (l.schedule == Schedule::GPipe) return m;
  if (l.schedule == Schedule::Interleaved) return std::min(m * v, (v + 1) * p - 1) / v;
  return std::min(m, p);
}

MemoryUse memory(const PlanRequest& r, const Layout& l) {
  const ModelConfig& m = r.model;
  const Precision& p = r.machine.precision;
  const BlockParameters psi = stage_parameters(m, l);
  const double replicas = d(l.dp) * l.cp;
  MemoryUse use = model_states(psi.dense, replicas, l.zero, p);
  const MemoryUse experts = model_states(psi.experts, replicas / l.ep, l.zero, p);
  use.parameters += experts.parameters;
  use.gradients += experts.gradients;
  use.optimizer += experts.optimizer;
  if (l.zero == 3) {  // two gathered blocks in flight and one block's unsharded gradients
    const BlockParameters block = block_parameters(m, l);
    use.parameters += 2 * (block.dense + block.experts) * p.parameter;
    use.gradients += (block.dense + block.experts) * p.gradient;
  }
  const double blocks = d(stage_layers(m, l));
  use.activations = in_flight(l) * blocks * kept_activation_bytes(m, l, p);
  if (l.recompute == Recompute::Full) use.activations += block_activation_bytes(m, l, p);
  // The last stage's head at its peak, one micro-batch: the vocabulary-parallel cross-entropy's
  // forward holds 7 logits-sized tensors at once (the logits, their clone, shifted, exp, the
  // one-hot targets, exp / Σexp and the softmax − one-hot it keeps for backward).
  use.activations +=
      kCrossEntropyLogits * d(l.micro_batch) * d(m.seq) / l.cp * d(m.vocab) / l.tp * p.activation;
  if (l.pp > 1) use.boundaries = (in_flight(l) * l.virtual_stages + 2) * boundary_bytes(r, l);
  return use;
}

/// The data-parallel reduction (and ZeRO's gathers) of a step: {exposed, overlapped}.
GroupTime data_parallel(const PlanRequest& r, const Layout& l, const Groups& g,
                        const MicroBatch& mb, CollectiveCosts& c) {
  GroupTime t{"dp"};
  const Precision& p = r.machine.precision;
  const BlockParameters psi = stage_parameters(r.model, l);
  auto reduce = [&](double params, GroupShape group) {
    if (l.zero == 0) return c.all_reduce(params * p.gradient, group);
    return c.reduce_scatter(params * p.gradient, group);
  };
  const double reduction = reduce(psi.dense, g.dp_cp) + reduce(psi.experts, g.edp);
  // Gradients are reduced bucket by bucket during the last micro-batch's backward.
  t.overlapped = std::min(reduction, mb.backward);
  t.exposed = reduction - t.overlapped;
  const double gather = c.all_gather(psi.dense * p.parameter, g.dp_cp) +
                        c.all_gather(psi.experts * p.parameter, g.edp);
  if (l.zero == 1 || l.zero == 2) t.exposed += gather;  // after the optimizer's step
  if (l.zero == 3) {  // before each block's forward and backward, prefetched behind compute
    const double per_micro_batch = 2 * gather;
    const BlockParameters block = block_parameters(r.model, l);
    const double first_block = 2 * (c.all_gather(block.dense * p.parameter, g.dp_cp) +
                                    c.all_gather(block.experts * p.parameter, g.edp));
    const double hidden = std::min(per_micro_batch - first_block, mb.forward + mb.backward);
    t.overlapped += d(l.micro_batches) * hidden;
    t.exposed += d(l.micro_batches) * (per_micro_batch - hidden);
  }
  return t;
}

}  // namespace

double Prediction::exposed_communication() const {
  double sum = 0;
  for (const GroupTime& group : groups) sum += group.exposed;
  return sum;
}

double Prediction::group_exposed(const std::string& group) const {
  for (const GroupTime& g : groups)
    if (g.group == group) return g.exposed;
  return 0;
}

Prediction predict(const PlanRequest& request, const Layout& layout, CollectiveCosts& costs) {
  const Groups g = groups_of(layout, request.ranks_per_host);
  const MicroBatch mb = micro_batch(request, layout, g, costs);
  const double m = d(layout.micro_batches);
  Prediction out;
  out.layout = layout;
  out.compute_seconds = m * (mb.forward + mb.backward);
  if (layout.pp > 1) out.bubble_seconds = (layout.pp - 1) * mb.total() / layout.virtual_stages;
  out.groups = {{"tp", m * mb.tp, 0},
                {"cp", m * mb.cp, 0},
                {"ep", m * mb.ep, 0},
                {"pp", m * mb.pp, 0},
                data_parallel(request, layout, g, mb, costs)};
  if (layout.pp > 1) {  // the tied embedding's gradient, summed over {first, last} stage
    const double bytes = d(request.model.vocab) * d(request.model.hidden) / layout.tp *
                         request.machine.precision.gradient;
    out.groups.push_back({"embedding", costs.all_reduce(bytes, {2, g.pp_across_hosts ? 2 : 1}), 0});
  }
  out.optimizer_seconds = optimizer_time(request, layout);
  out.step_seconds = out.compute_seconds + out.bubble_seconds + out.optimizer_seconds +
                     out.exposed_communication();
  out.memory = memory(request, layout);
  return out;
}

}  // namespace chorus::plan
