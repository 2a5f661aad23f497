// One GptPipeline step: this rank's actions of the verified schedule, in order.
//
// Each chunk's input on a stage after the first is a leaf that requires grad, so a chunk's
// backward ends at its input and yields the gradient to send. A full backward is
// Tensor::backward (accumulating into the parameters' gradients). Under a schedule that splits
// the backward, the model's linear layers defer their weight gradients (GptConfig::
// defer_weight_gradients): B is the same Tensor::backward, which then computes the input
// gradients and every other parameter's gradient, and W is GptModel::compute_weight_gradients(),
// which adds the pending weight gradients (dyᵀ·x per linear layer) to their .grad.
#include "gpt_pipeline_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

namespace chorus::train {

using Op = PipelineOp;

int GptPipeline::Impl::tag(int kind, int to_stage, int i) const {
  return (kind * schedule.virtual_stages() + to_stage) * tag_span + i;
}

detail::ExpectedTensor GptPipeline::Impl::expected(const char* what, int i, int from,
                                                   int to) const {
  const at::Tensor& tokens = (*batch)[static_cast<std::size_t>(i)].tokens;
  const std::int64_t cp_rows = tokens.size(0) / (groups.cp ? groups.cp->size() : 1);
  const std::int64_t rows = config.sequence_parallel ? cp_rows / groups.tp.size() : cp_rows;
  return {what, i, from, to, {rows, tokens.size(1), config.hidden}, config.dtype};
}

void GptPipeline::Impl::forward(int i, int chunk) {
  const int s = stage(chunk);
  MicroBatchSlot& slot = slots[chunk][i];
  const MicroBatch& mb = (*batch)[static_cast<std::size_t>(i)];
  model.set_step({position.step, position.micro_batch,
                  position.first_sample + first_samples[static_cast<std::size_t>(i)]});
  at::Tensor x = s == 0 ? model.embed(mb.tokens) : slot.input;
  x = model.run_blocks(x, first[s], layers[s]);
  if (s == last_stage()) {
    const at::Tensor per_token = vocab_parallel_cross_entropy(
        model.head(x), model.local_rows(mb.targets), groups.tp, config.vocab);
    slot.loss = per_token.sum() / tokens;
    const at::Tensor value = slot.loss.detach();
    step_loss = step_loss.defined() ? step_loss + value : value;
    return;
  }
  slot.output = x;
  if (p() == 1) slots[chunk + 1][i].input = x.detach().requires_grad_();
}

void GptPipeline::Impl::hand_over_input_grad(int i, int chunk) {
  if (p() == 1 && stage(chunk) > 0) slots[chunk - 1][i].output_grad = slots[chunk][i].input_grad;
}

void GptPipeline::Impl::backward(int i, int chunk, Op op) {
  if (op == Op::BackwardWeight) {
    model.compute_weight_gradients();  // the rank's one chunk: its pending weight gradients
    return;
  }
  const int s = stage(chunk);
  MicroBatchSlot& slot = slots[chunk][i];
  // A full backward, or B: the same call, the model's linear layers leaving their weight
  // gradients pending for W when the schedule splits the backward.
  s == last_stage() ? slot.loss.backward() : slot.output.backward(slot.output_grad);
  if (s > 0) slot.input_grad = slot.input.grad();
  hand_over_input_grad(i, chunk);
  slot = MicroBatchSlot{{}, {}, {}, {}, slot.input_grad};
}

void GptPipeline::Impl::run(const std::vector<PipelineAction>& actions, std::size_t k) {
  const PipelineAction& a = actions[k];
  const int i = a.micro_batch, c = a.chunk, s = stage(c);
  MicroBatchSlot& slot = slots[c][i];
  if (a.peer < 0) post_ahead(actions, k);  // a computation
  const double start = seconds();
  if (options.synthetic_compute > 0 && a.peer < 0) {
    synthetic(a);
    record.computations.push_back({a, start, seconds()});
    return;
  }
  switch (a.op) {
    case Op::Forward:
      forward(i, c);
      break;
    case Op::Backward:
    case Op::BackwardInput:
    case Op::BackwardWeight:
      backward(i, c, a.op);
      break;
    case Op::SendActivation:
      sends.push_back(detail::send_tensor(groups.pp, slot.output, a.peer, tag(0, s + 1, i), s));
      return;
    case Op::SendGradient:
      sends.push_back(detail::send_tensor(groups.pp, slot.input_grad, a.peer, tag(1, s - 1, i), s));
      return;
    case Op::RecvActivation:
      slot.input = receive(a, k).requires_grad_();
      return;
    case Op::RecvGradient:
      slot.output_grad = receive(a, k);
      return;
  }
  record.computations.push_back({a, start, seconds()});
}

void GptPipeline::Impl::synthetic(const PipelineAction& a) {
  const int i = a.micro_batch, chunk = a.chunk, s = stage(chunk);
  const ActionCosts& c = options.stage_costs.empty()
                             ? options.costs
                             : options.stage_costs[static_cast<std::size_t>(s)];
  const double cost = a.op == Op::Forward         ? c.forward
                      : a.op == Op::Backward      ? c.backward_input + c.backward_weight
                      : a.op == Op::BackwardInput ? c.backward_input
                                                  : c.backward_weight;
  // The blocks' tp all-reduces (and the embedding's or the head's) between slices of the sleep.
  const bool forward = a.op == Op::Forward, weight_only = a.op == Op::BackwardWeight;
  const std::int64_t reductions = groups.tp.size() == 1 || weight_only
                                      ? 0
                                      : 2 * layers[static_cast<std::size_t>(s)] +
                                            ((forward ? s == 0 : s == last_stage()) ? 1 : 0);
  const std::int64_t slices = std::max<std::int64_t>(1, reductions);
  const auto slice = std::chrono::duration<double>(cost * options.synthetic_compute / slices);
  const at::Tensor boundary =
      at::zeros(expected("activation", i, s, s + 1).sizes, at::dtype(config.dtype));
  for (std::int64_t k = 0; k < slices; ++k) {
    std::this_thread::sleep_for(slice);
    if (k < reductions) detail::all_reduce_sum(groups.tp, boundary);
  }
  MicroBatchSlot& slot = slots[chunk][i];
  if (forward && s < last_stage()) {
    slot.output = boundary;
    if (p() == 1) slots[chunk + 1][i].input = slot.output;
  } else if (forward && !step_loss.defined()) {
    step_loss = at::zeros({}, at::dtype(config.dtype));
  } else if ((a.op == Op::Backward || a.op == Op::BackwardInput) && s > 0) {
    slot.input_grad = at::zeros_like(slot.input);
    hand_over_input_grad(i, chunk);
  }
  if (a.op != Op::Backward && !weight_only) return;
  at::NoGradGuard no_grad;  // the chunk's gradients: zeros, so that their reduction is real
  for (const GptParameter& q : model.named_parameters())
    if (stage_owns(q.name, s) && !q.tensor.grad().defined())
      q.tensor.mutable_grad() = at::zeros_like(q.tensor);
}

double GptPipeline::Impl::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

GptPipeline::Impl::Posted GptPipeline::Impl::post(const PipelineAction& a) const {
  const int i = a.micro_batch, s = stage(a.chunk);
  const bool activation = a.op == Op::RecvActivation;
  const int from = activation ? s - 1 : s + 1;
  return {detail::post_recv(groups.pp, a.peer, tag(activation ? 0 : 1, s, i),
                            expected(activation ? "activation" : "gradient", i, from, s)),
          seconds()};
}

void GptPipeline::Impl::post_ahead(const std::vector<PipelineAction>& actions, std::size_t k) {
  for (std::size_t j = k + 1; j < actions.size(); ++j) {
    const Op op = actions[j].op;
    if (op != Op::RecvActivation && op != Op::RecvGradient) {
      if (op == Op::SendActivation || op == Op::SendGradient) continue;
      break;  // the next computation
    }
    if (posted.count(j) == 0) posted.emplace(j, post(actions[j]));
  }
}

at::Tensor GptPipeline::Impl::receive(const PipelineAction& a, std::size_t k) {
  auto it = posted.find(k);
  if (it == posted.end()) it = posted.emplace(k, post(a)).first;
  const at::Tensor out = detail::finish_recv(groups.pp, it->second.recv);
  record.receives.push_back({a, it->second.at, seconds()});
  posted.erase(it);
  return out;
}

void GptPipeline::Impl::reduce_tied_embedding() {
  if (p() == 1 || !(holds_first() || holds_last())) return;
  at::Tensor weight = model.named_parameters().front().tensor;  // embedding.weight
  const at::Tensor grad = weight.grad().defined() ? weight.grad() : at::zeros_like(weight);
  const at::Tensor sum = detail::all_reduce_sum(*groups.embedding, grad);
  at::NoGradGuard no_grad;
  if (weight.grad().defined())
    weight.mutable_grad().copy_(sum);
  else
    weight.mutable_grad() = sum;
}

at::Tensor GptPipeline::Impl::run_all(const std::vector<PipelineAction>& actions,
                                      const std::vector<MicroBatch>& micro_batches) {
  tokens = 0;
  first_samples.clear();
  std::int64_t samples = 0;
  for (const MicroBatch& mb : micro_batches) {
    require_argument(mb.tokens.defined() && mb.tokens.dim() == 2 && mb.targets.defined() &&
                         mb.targets.sizes() == mb.tokens.sizes(),
                     "GptPipeline: a micro-batch's tokens and targets must both be [s, b]");
    tokens += static_cast<double>(mb.tokens.numel());
    first_samples.push_back(std::exchange(samples, samples + mb.tokens.size(1)));
  }
  batch = &micro_batches;
  tag_span = std::max<int>(1, static_cast<int>(micro_batches.size()));
  slots.assign(static_cast<std::size_t>(schedule.chunks()),
               std::vector<MicroBatchSlot>(micro_batches.size()));
  step_loss = at::Tensor();
  record = {};
  began = std::chrono::steady_clock::now();
  try {
    for (std::size_t k = 0; k < actions.size(); ++k) {
      // Headers that arrived meanwhile: their payloads' receives are posted now.
      for (auto& [index, p] : posted) detail::advance_recv(groups.pp, p.recv);
      run(actions, k);
      if (reducer == nullptr) continue;
      for (int c = 0; c < schedule.chunks(); ++c)
        if (last_gradient_action[static_cast<std::size_t>(c)] == k) mark_chunk_ready(c);
    }
    for (detail::PendingSend& send : sends) send.wait();
  } catch (...) {
    // The neighbours, and the other holder of the tied embedding, may be waiting for this
    // stage: make them fail now, not at the timeout.
    Communicator pp = groups.pp.comm;
    pp.abort();
    if (p() > 1 && (holds_first() || holds_last())) {
      Communicator embedding = groups.embedding->comm;
      embedding.abort();
    }
    throw;
  }
  sends.clear();
  posted.clear();
  slots.clear();
  batch = nullptr;
  at::Tensor loss = std::exchange(step_loss, at::Tensor());
  if (loss.defined()) model.sum_over_cp(loss);  // each cp rank's loss covers its tokens
  return loss;
}

at::Tensor GptPipeline::Impl::step(const std::vector<MicroBatch>& micro_batches,
                                   GradientReducer* step_reducer,
                                   const DropoutPosition& step_position) {
  position = step_position;
  const int m = schedule.micro_batches();
  require_argument(static_cast<int>(micro_batches.size()) == m,
                   "GptPipeline: " + std::to_string(micro_batches.size()) +
                       " micro-batches for a schedule of " + std::to_string(m));
  reducer = step_reducer;
  model.set_moe_loss_scale(1.0 / m);  // each micro-batch's MoE losses weigh 1/m of the step's
  at::Tensor loss;
  try {
    loss = run_all(schedule.ranks[static_cast<std::size_t>(rank())], micro_batches);
  } catch (...) {
    reducer = nullptr;
    throw;
  }
  try {
    reduce_tied_embedding();
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.what()) + pipeline_cause());
  }
  if (reducer != nullptr && (holds_first() || holds_last()))
    reducer->mark_ready(model.named_parameters().front().tensor);  // embedding.weight
  reducer = nullptr;
  return loss;
}

std::string GptPipeline::Impl::pipeline_cause() {
  // The other holder of the embedding aborts it when its actions fail (a dead neighbour, a
  // shape mismatch), and it aborted the pipeline group too: a call there fails promptly with
  // the reason, which names the dead or failing stage.
  Communicator pp = groups.pp.comm;
  std::string cause = pp.last_error();
  if (cause.empty()) {
    try {
      pp.barrier();
    } catch (const Error& why) {
      cause = why.what();
    }
  }
  pp.abort();
  return cause.empty() ? "" : " (pipeline group: " + cause + ")";
}

void GptPipeline::Impl::mark_chunk_ready(int chunk) {
  for (const GptParameter& p : model.named_parameters())
    if (p.name != "embedding.weight" && stage_owns(p.name, stage(chunk)))
      reducer->mark_ready(p.tensor);
}

/// Each micro-batch through this rank's chunks in order: virtual stage s of micro-batch i
/// waits only for stage s - 1 of i, which every rank reaches first in (i, chunk) order, so
/// the ranks never wait on each other in a cycle.
at::Tensor GptPipeline::Impl::evaluate(const std::vector<MicroBatch>& micro_batches) {
  at::NoGradGuard no_grad;
  struct NoDropout {  // evaluation draws no masks; training resumes after it, even on a throw
    GptModel& model;
    bool was = model.training();
    ~NoDropout() { model.set_training(was); }
  } no_dropout{model};
  model.set_training(false);
  std::vector<PipelineAction> actions;
  const int n = static_cast<int>(micro_batches.size());
  const int previous = (rank() + p() - 1) % p(), next = (rank() + 1) % p();
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < schedule.chunks(); ++c) {
      const bool remote = p() > 1;
      if (remote && stage(c) > 0) actions.push_back({Op::RecvActivation, i, c, previous});
      actions.push_back({Op::Forward, i, c, -1});
      if (remote && stage(c) < last_stage()) actions.push_back({Op::SendActivation, i, c, next});
    }
  return run_all(actions, micro_batches);
}

}  // namespace chorus::train
