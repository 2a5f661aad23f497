// One GptPipeline step: this rank's actions of the verified schedule, in order.
//
// Each chunk's input on a stage after the first is a leaf that requires grad, so a chunk's
// backward ends at its input and yields the gradient to send. A full backward is
// Tensor::backward (accumulating into the parameters' gradients); the split backward of
// zero-bubble schedules takes the input gradient with autograd::grad(retain_graph) and, at W,
// the chunk's parameter gradients with a second autograd::grad, added to their .grad (W runs
// the graph's backward again, so it costs a full backward here; the deferred weight-gradient
// linear layers would make it cost only the weight part).
#include "gpt_pipeline_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <string>
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
  const int s = stage(chunk);
  MicroBatchSlot& slot = slots[chunk][i];
  const bool last = s == last_stage();
  const at::Tensor& target = last ? slot.loss : slot.output;
  const std::vector<at::Tensor> grad =
      last ? std::vector<at::Tensor>{} : std::vector<at::Tensor>{slot.output_grad};
  if (op == Op::Backward) {
    last ? slot.loss.backward() : slot.output.backward(slot.output_grad);
    if (s > 0) slot.input_grad = slot.input.grad();
  } else if (op == Op::BackwardInput) {
    if (s > 0) slot.input_grad = torch::autograd::grad({target}, {slot.input}, grad, true)[0];
  } else {  // BackwardWeight
    const std::vector<at::Tensor> params = chunk_parameters(chunk);
    const auto grads = torch::autograd::grad({target}, params, grad, false, false, true);
    at::NoGradGuard no_grad;
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (!grads[k].defined()) continue;
      at::Tensor p = params[k];
      if (p.grad().defined())
        p.mutable_grad().add_(grads[k]);
      else
        p.mutable_grad() = grads[k];
    }
  }
  if (op != Op::BackwardWeight) hand_over_input_grad(i, chunk);
  if (op != Op::BackwardInput) slot = MicroBatchSlot{{}, {}, {}, {}, slot.input_grad};
}

void GptPipeline::Impl::run(const PipelineAction& a) {
  const int i = a.micro_batch, c = a.chunk, s = stage(c);
  MicroBatchSlot& slot = slots[c][i];
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
      break;
    case Op::SendGradient:
      sends.push_back(detail::send_tensor(groups.pp, slot.input_grad, a.peer, tag(1, s - 1, i), s));
      break;
    case Op::RecvActivation:
      slot.input =
          detail::recv_tensor(groups.pp, a.peer, tag(0, s, i), expected("activation", i, s - 1, s))
              .requires_grad_();
      break;
    case Op::RecvGradient:
      slot.output_grad =
          detail::recv_tensor(groups.pp, a.peer, tag(1, s, i), expected("gradient", i, s + 1, s));
      break;
  }
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
  try {
    for (std::size_t k = 0; k < actions.size(); ++k) {
      run(actions[k]);
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
