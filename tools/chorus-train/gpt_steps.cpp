// The GPT run's step loop: one optimizer step per sampler batch, by strategy: replicated (the
// reducer over dp_cp, or MoE's two reductions), ZeRO-1/2 (the shards over dp_cp) and ZeRO-3
// (units gathered around their use). See gpt_trainer_impl.hpp.
#include "gpt_pipeline_setup.hpp"
#include "gpt_trainer_impl.hpp"

namespace chorus::train_tool {
namespace {

constexpr double kClipNorm = 1.0;  ///< global gradient norm clipping

}  // namespace

void GptTrainer::train() {
  say(describe());
  const std::int64_t held = options_.peak_memory ? start_memory_watch() : 0;
  while (next_epoch_if_done()) {
    if (options_.steps > 0 && step_ >= options_.steps) break;
    train_step(sampler_.next_batch(static_cast<std::size_t>(options_.batch)));
    if (step_ % options_.log_every == 0) log_progress();
    if (options_.eval_every > 0 && step_ % options_.eval_every == 0) report("validation", step_);
    if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) save();
  }
  if (steps_ > 0) log_progress();
  if (!options_.timeline_svg.empty()) write_run_timeline(options_, pipeline_, mesh_, comm_);
  if (options_.peak_memory) report_peak_memory(comm_, held, pipeline_.parameters());
  if (!options_.checkpoint.empty()) save();
  summarize();
}

bool GptTrainer::next_epoch_if_done() {
  if (!sampler_.epoch_done()) return true;
  if (sampler_.epoch() + 1 >= static_cast<std::uint64_t>(options_.epochs)) return false;
  sampler_.set_epoch(sampler_.epoch() + 1);
  return true;
}

void GptTrainer::train_step(const std::vector<std::size_t>& indices) {
  const auto [tokens, targets] = train_.batch(indices);
  if (zero3_) {
    zero3_step(tokens, targets);
    return;
  }
  const auto start = GptClock::now();
  const bool alternate_skip = in_unsynced_block(options_, step_);
  // Dropout masks: replica d's samples follow those of replicas 0..d-1 in the global batch.
  const train::DropoutPosition position{.step = static_cast<std::uint64_t>(step_),
                                        .first_sample = mesh_.coordinates().dp * options_.batch};
  const auto micro_batches = train::split_micro_batches(tokens, targets, options_.micro_batches);
  if (!options_.timeline_svg.empty()) {  // the records' starts aligned
    Communicator pp = mesh_.pp().comm;
    pp.barrier();
  }
  const torch::Tensor loss = zero_ ? sharded_step(micro_batches, position)
                                   : replicated_step(micro_batches, position, !alternate_skip);
  step_times_.push_back(
      {std::chrono::duration<double>(GptClock::now() - start).count(), !alternate_skip});
  // Untimed: every step of --alternate-sync starts with the ranks together (as trainer.cpp).
  if (alternate_skip) comm_.barrier();
  if (loss.defined()) {  // the last stage's ranks (summed over cp: the whole sequence's)
    loss_sum_ += loss.item<double>();
    loss_steps_ += 1;
  }
  steps_ += 1;
  if (holds_replica_sums() && mesh_.coordinates().pp == 0) tokens_ += tokens.numel();
  ++step_;
}

/// Without ZeRO: each chunk's gradients are reduced over dp_cp (cp alone in a step without dp
/// sync) as soon as its last backward has run (MoE: all at the step's end), clipped over the
/// replicas and stepped. Returns the pipeline's loss.
torch::Tensor GptTrainer::replicated_step(const std::vector<train::MicroBatch>& micro_batches,
                                          const train::DropoutPosition& position, bool synced) {
  optimizer_->zero_grad();
  if (moe_reducers_) {
    moe_reducers_->begin_step();
  } else {
    sync_->begin_step(!options_.no_sync && synced);
  }
  const torch::Tensor loss =
      pipeline_.forward_backward(micro_batches, sync_ ? sync_->reducer() : nullptr, position);
  if (moe_reducers_) {
    moe_reducers_->finish_step();
  } else {
    sync_->finish_step();
  }
  // The dp_cp reduction and the tp sum of sequence-parallel partial gradients commute.
  train::all_reduce_partial_gradients(pipeline_.partial_gradient_parameters(), mesh_.tp());
  if (moe_reducers_) {  // experts sharded over ep, everything replicated over edp
    train::clip_grad_norm(moe_norm_pieces(pipeline_.norm_pieces(2), pipeline_.named_parameters()),
                          {mesh_.tp(), mesh_.pp(), mesh_.expert(), mesh_.expert_data()}, kClipNorm);
  } else {
    train::clip_grad_norm(pipeline_.norm_pieces(1),
                          {mesh_.tp(), mesh_.pp(), sync_->replica_group()}, kClipNorm);
  }
  optimizer_->step();
  return loss;
}

/// ZeRO-1/2 over dp_cp: the step's gradients (their tp partial sums taken first) are
/// reduce-scattered once the pipeline's backward has run, the global norm is clipped over the
/// shards (tp and pp placements as the model holds them), the optimizer steps this rank's
/// shards and the parameters are all-gathered. Returns the pipeline's loss.
torch::Tensor GptTrainer::sharded_step(const std::vector<train::MicroBatch>& micro_batches,
                                       const train::DropoutPosition& position) {
  zero_->zero_grad();
  zero_->begin_step();
  const torch::Tensor loss = pipeline_.forward_backward(micro_batches, nullptr, position);
  train::all_reduce_partial_gradients(pipeline_.partial_gradient_parameters(), mesh_.tp());
  for (const torch::Tensor& p : pipeline_.parameters()) zero_->mark_ready(p);
  zero_->finish_step();
  std::vector<std::vector<train::GradPlacement>> placements;
  for (train::NormPiece& piece : pipeline_.norm_pieces()) placements.push_back(piece.placements);
  zero_->clip_grad_norm(kClipNorm, placements, {mesh_.tp(), mesh_.pp()});
  zero_->step();
  return loss;
}

/// ZeRO-3 (data parallelism alone): each unit gathered around its forward and backward, its
/// gradient reduce-scattered as its backward ends, the shards clipped and stepped.
void GptTrainer::zero3_step(const torch::Tensor& tokens, const torch::Tensor& targets) {
  zero3_->zero_grad();
  zero3_->begin_step();
  const torch::Tensor loss = train::gpt_loss(pipeline_.model(), *zero3_, tokens, targets);
  loss.backward();
  zero3_->finish_step();
  zero3_->clip_grad_norm(kClipNorm);
  zero3_->step();
  loss_sum_ += loss.item<double>();
  loss_steps_ += 1;
  steps_ += 1;
  tokens_ += tokens.numel();
  ++step_;
}

}  // namespace chorus::train_tool
