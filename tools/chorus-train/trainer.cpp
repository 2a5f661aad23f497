// The training loop of chorus-train: DDP (or ZeRO) steps over the sampler's batches, progress
// lines, checkpoints, the final distributed evaluation.
#include "trainer.hpp"

#include "gpt_trainer.hpp"
#include "run_state.hpp"
#include "tasks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/data.hpp>
#include <chorus/train/ddp.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <numeric>

namespace chorus::train_tool {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Loss and time since the last progress line; step times of the whole run.
struct Progress {
  double loss_sum = 0;
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  double comm_seconds_at_start = 0;
  Clock::time_point start = Clock::now();
  std::vector<StepTime> steps_taken;
};

class Trainer {
 public:
  Trainer(const Options& options, Communicator& comm)
      : options_(options),
        comm_(comm),
        task_(make_task(options)),
        sampler_(task_->train_size(), comm.rank(), comm.size(), options.seed) {
    const auto parameters = train::module_parameter_pieces(*task_->module());
    // ZeRO: the optimizer over this rank's shards.
    const auto over_shards = [&](std::vector<torch::Tensor> shards) {
      return make_optimizer(options, std::move(shards));
    };
    if (options_.zero == 3) {
      train::Zero3Options zero;
      zero.overlap_backward = options_.overlap;
      zero.mixed_precision = mixed_precision(options_);
      zero3_ =
          std::make_unique<train::Zero3>(task_->module()->parameters(), task_->zero3_units(),
                                         train::Group{comm_, "dp", nullptr}, over_shards, zero);
      state_ = train::zero3_state(*zero3_, parameters);
      restore();
      return;
    }
    if (options_.zero > 0) {
      zero_ = std::make_unique<train::ZeroOptimizer>(task_->module()->parameters(),
                                                     train::Group{comm_, "dp", nullptr},
                                                     over_shards, zero_options());
      state_ = train::zero_state(*zero_, parameters);
      restore();
      return;
    }
    optimizer_ = make_optimizer(options, task_->module()->parameters());
    state_ = train::replicated_state(*optimizer_, parameters, train::Group{comm_, "dp", nullptr});
    restore();
    // Without synchronisation the replicas start equal from the same seed (or checkpoint).
    if (!options_.no_sync) {
      ddp_ = std::make_unique<train::DistributedDataParallel>(
          task_->module(), comm_, sync_options<train::DdpOptions>(options_));
    }
  }

  void train() {
    say("model: " + task_->describe() + "; " + std::to_string(comm_.size()) + " ranks x batch " +
        std::to_string(options_.batch) + (options_.no_sync ? ", no gradient sync" : ""));
    while (next_epoch_if_done()) {
      if (options_.steps > 0 && step_ >= options_.steps) break;
      const auto indices = sampler_.next_batch(static_cast<std::size_t>(options_.batch));
      train_step(indices);
      if (step_ % options_.log_every == 0) log_progress();
      if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) save();
    }
    if (progress_.steps > 0) log_progress();
    if (!options_.checkpoint.empty()) save();
    summarize();
  }

  void evaluate() {
    torch::NoGradGuard no_grad;
    const auto [first, last] = train::eval_shard(task_->test_size(), comm_.rank(), comm_.size());
    train::EvalSums sums;
    const std::size_t chunk = 500;
    for (std::size_t begin = first; begin < last; begin += chunk) {
      std::vector<std::size_t> indices(std::min(chunk, last - begin));
      std::iota(indices.begin(), indices.end(), begin);
      const Batch batch = task_->batch(indices, false);
      const auto logits = forward(batch.input);
      sums.loss_sum += torch::nn::functional::cross_entropy(
                           logits, batch.target,
                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                           .item<double>();
      sums.correct += logits.argmax(1).eq(batch.target).sum().item<std::int64_t>();
      sums.count += batch.target.numel();
    }
    const train::EvalResult result = train::all_reduce_eval(comm_, sums);
    char line[200];
    std::snprintf(line, sizeof line,
                  "test: %lld %s, accuracy %.4f, mean loss %.4f, perplexity %.3f",
                  static_cast<long long>(result.count),
                  options_.model == ModelKind::Mlp ? "images" : "characters", result.accuracy,
                  result.mean_loss, result.perplexity);
    say(line);
  }

 private:
  /// Moves to the next epoch when the current one is exhausted; false when training is over.
  bool next_epoch_if_done() {
    if (!sampler_.epoch_done()) return true;
    if (sampler_.epoch() + 1 >= static_cast<std::uint64_t>(options_.epochs)) return false;
    sampler_.set_epoch(sampler_.epoch() + 1);
    return true;
  }

  /// With --alternate-sync, whether this step belongs to an unsynchronised block: the same
  /// compute with DDP idle (its hooks do nothing while no backward is prepared), timed without
  /// the barrier that follows it.
  bool step_skips_sync() const { return in_unsynced_block(options_, step_); }

  void train_step(const std::vector<std::size_t>& indices) {
    const Batch batch = task_->batch(indices, true);
    const auto start = Clock::now();
    if (zero_) {
      zero_step(*zero_, batch, static_cast<std::int64_t>(indices.size()));
    } else if (zero3_) {
      zero_step(*zero3_, batch, static_cast<std::int64_t>(indices.size()));
    } else {
      ddp_step(batch, static_cast<std::int64_t>(indices.size()));
    }
    progress_.steps_taken.push_back({seconds_since(start), !step_skips_sync()});
    // Untimed: every step of --alternate-sync starts with the ranks together, as a step after
    // a synchronised one does, so no step pays for the drift of an unsynchronised one.
    if (step_skips_sync() && ddp_) comm_.barrier();
    progress_.samples += static_cast<std::int64_t>(indices.size());
    ++step_;
  }

  train::ZeroOptions zero_options() const {
    auto zero = sync_options<train::ZeroOptions>(options_);
    zero.stage = options_.zero;
    zero.mixed_precision = mixed_precision(options_);
    return zero;
  }

  /// The model's logits; under ZeRO-3 each layer's parameters gathered around its use.
  torch::Tensor forward(const torch::Tensor& input) {
    return zero3_ ? task_->forward_sharded(input, *zero3_) : task_->forward(input);
  }

  /// ZeRO (ZeroOptimizer or Zero3): gradients reduce-scattered during backward, the shards
  /// stepped (and at stages 1-2 all-gathered).
  template <class Zero>
  void zero_step(Zero& zero, const Batch& batch, std::int64_t samples) {
    zero.zero_grad();
    zero.begin_weighted_step(samples, samples);
    const auto loss = torch::nn::functional::cross_entropy(forward(batch.input), batch.target);
    loss.backward();
    zero.finish_step();
    if (task_->clip_norm() > 0) zero.clip_grad_norm(task_->clip_norm());
    zero.step();
    progress_.loss_sum += loss.item<double>();
    progress_.steps += 1;
  }

  void ddp_step(const Batch& batch, std::int64_t samples) {
    train::DistributedDataParallel* ddp = step_skips_sync() ? nullptr : ddp_.get();
    optimizer_->zero_grad();
    // Before the forward pass (as PyTorch's DDP does): the step's sample total is then
    // all-reduced while the forward pass runs, so every gradient hook already knows it.
    if (ddp) ddp->prepare_for_backward(samples);
    const auto loss =
        torch::nn::functional::cross_entropy(task_->forward(batch.input), batch.target);
    loss.backward();
    if (ddp) ddp->finish_gradient_sync();
    clip_gradients(ddp);
    optimizer_->step();
    if (ddp) ddp->after_optimizer_step();
    progress_.loss_sum += loss.item<double>();
    progress_.steps += 1;
  }

  void clip_gradients(train::DistributedDataParallel* ddp) {
    if (task_->clip_norm() <= 0) return;
    if (ddp) {
      ddp->clip_grad_norm(task_->clip_norm());
    } else {
      torch::nn::utils::clip_grad_norm_(task_->module()->parameters(), task_->clip_norm());
    }
  }

  /// One line per interval: the ranks' mean loss (all-reduced), global samples/s and the
  /// share of the interval rank 0 spent waiting for gradient communication.
  void log_progress() {
    std::array<double, 3> sums = {progress_.loss_sum, static_cast<double>(progress_.steps),
                                  static_cast<double>(progress_.samples)};
    comm_.all_reduce(sums.data(), sums.data(), sums.size(), DataType::Float64, ReduceOp::Sum);
    const double elapsed = seconds_since(progress_.start);
    const double comm_seconds = ddp_     ? ddp_->stats().seconds_communicating_exposed
                                : zero_  ? zero_->reducer().stats().seconds_waiting
                                : zero3_ ? zero3_->reducer().stats().seconds_waiting
                                         : 0.0;
    char line[200];
    std::snprintf(line, sizeof line, "epoch %llu step %lld loss %.9g samples/s %.1f comm %.1f%%",
                  static_cast<unsigned long long>(sampler_.epoch()), static_cast<long long>(step_),
                  sums[0] / sums[1], sums[2] / elapsed,
                  100.0 * (comm_seconds - progress_.comm_seconds_at_start) / elapsed);
    say(line);
    progress_.loss_sum = 0;
    progress_.steps = 0;
    progress_.samples = 0;
    progress_.comm_seconds_at_start = comm_seconds;
    progress_.start = Clock::now();
  }

  /// Median step time (rank 0, warm-up left out) and the throughput it implies; with
  /// --alternate-sync also the unsynchronised steps' median.
  void summarize() {
    const StepMedians medians = step_medians(progress_.steps_taken);
    if (medians.synced == 0) return;
    char line[200];
    std::snprintf(line, sizeof line, "summary steps=%lld samples_per_s=%.1f step_ms_median=%.2f",
                  static_cast<long long>(step_),
                  static_cast<double>(options_.batch * comm_.size()) / medians.synced,
                  medians.synced * 1e3);
    say(std::string(line).append(unsynced_median_text(medians)));
    if (!ddp_) return;
    if (options_.alternate_sync > 0 && step_ > options_.alternate_sync) {
      say("replicas equal: not checked (--alternate-sync lets them drift apart)");
    } else {
      say(std::string("replicas equal: ") + (ddp_->verify_replicas() ? "yes" : "NO"));
    }
  }

  /// What a checkpoint records and a resume must match: the model, the optimizer and
  /// everything that decides which samples each step takes. The global batch, not the rank
  /// count: step s takes the same samples at any rank count (the sampler deals the epoch's
  /// order round-robin), so a run resumes at another rank count and strategy.
  train::RunConfig run_config() const {
    train::RunConfig config = task_->config();
    config.merge(common_run_config(options_));
    config.erase("--batch");
    config["global batch"] = std::to_string(options_.batch * comm_.size());
    return config;
  }

  /// Each rank its shards (DDP: rank 0 everything), in the one checkpoint format.
  void save() {
    const train::TrainingState state = run_state(step_, sampler_, comm_.size(), run_config());
    train::save_sharded_checkpoint(options_.checkpoint, *task_->module(), state_, state, comm_);
  }

  /// With --resume: the checkpoint's state when there is one that fits this run (refused with
  /// a sentence naming what differs, on every rank, before any step), else a fresh start.
  /// ZeRO-1/2's load writes the parameters and the shards; ZeRO-3's the shards, whose half
  /// blocks (mixed precision) are then rounded from them.
  void restore() {
    if (!options_.resume) return;
    auto state = train::resume_sharded_checkpoint(options_.checkpoint, *task_->module(), state_,
                                                  run_config(), comm_);
    if (state && zero3_) zero3_->refresh_from_shards();
    step_ = resume_position(state, options_.checkpoint, sampler_, comm_.size(), comm_);
  }

  void say(const std::string& line) const { train_tool::say(comm_, line); }

  const Options& options_;
  Communicator& comm_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<train::DistributedDataParallel> ddp_;
  std::unique_ptr<train::ZeroOptimizer> zero_;
  std::unique_ptr<train::Zero3> zero3_;
  train::ShardedState state_;  ///< what save() and restore() read and fill
  train::DistributedSampler sampler_;
  std::int64_t step_ = 0;
  Progress progress_;
};

}  // namespace

void run_training(const Options& options, Communicator& comm) {
  try {
    // Before anything is loaded or trained: a checkpoint that cannot be written fails now.
    if (!options.checkpoint.empty()) train::check_checkpoint_path(options.checkpoint, comm);
    torch::set_num_threads(options.threads);
    torch::manual_seed(options.seed);
    if (options.model == ModelKind::Gpt) {
      run_gpt_training(options, comm);
      return;
    }
    Trainer trainer(options, comm);
    trainer.train();
    if (options.eval) trainer.evaluate();
  } catch (const c10::Error& e) {
    throw Error(Status::SystemError, e.what_without_backtrace());
  }
}

}  // namespace chorus::train_tool
