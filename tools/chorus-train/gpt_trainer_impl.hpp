// The GPT run of chorus-train as one object, shared by the files that define its parts:
// set-up, resume and checkpoints (gpt_trainer.cpp), the step loop (gpt_steps.cpp), progress
// lines, summary and validation (gpt_progress.cpp). See gpt_trainer.hpp.
#pragma once

#include "gpt_moe.hpp"
#include "gpt_setup.hpp"
#include "options.hpp"
#include "run_state.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/data.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline.hpp>
#include <chorus/train/reducer.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train_tool {

using GptClock = std::chrono::steady_clock;

/// The model split over the mesh's tp and cp groups and run as a pipeline over its pp group
/// (GptPipeline; one stage at --pp 1). Its gradients are summed over cp and averaged over dp by
/// the gradient reducer over the dp_cp group, or under ZeRO-1/2 reduce-scattered over it with
/// the optimizer stepping this rank's shards; under ZeRO-3 (dp alone) each block is a unit.
class GptTrainer {
 public:
  /// Collective: the mesh, the pipeline, the optimizer (ZeRO's over the shards) and, with
  /// --resume, the checkpoint's state.
  GptTrainer(const Options& options, Communicator& comm);

  /// The step loop: progress lines, periodic validation and checkpoints, then the summary.
  void train();
  /// The final line: validation loss and perplexity over the --eval-windows samples.
  void evaluate() { report("final validation", -1); }

 private:
  // Set-up (gpt_trainer.cpp): the optimizer and what checkpoints hold, per strategy.
  void set_up_zero3();
  void set_up_zero();
  void set_up_replicated();
  /// Without ZeRO, after restore(): the gradient reduction (MoE's two or DataParallelSync).
  void set_up_gradient_sync();

  // Checkpoints (gpt_trainer.cpp).
  train::RunConfig run_config() const;
  void save();
  void restore();

  // The step loop (gpt_steps.cpp).
  bool next_epoch_if_done();
  void train_step(const std::vector<std::size_t>& indices);
  torch::Tensor replicated_step(const std::vector<train::MicroBatch>& micro_batches,
                                const train::DropoutPosition& position, bool synced);
  torch::Tensor sharded_step(const std::vector<train::MicroBatch>& micro_batches,
                             const train::DropoutPosition& position);
  void zero3_step(const torch::Tensor& tokens, const torch::Tensor& targets);

  // Progress and validation (gpt_progress.cpp).
  std::string describe() const;
  std::string zero_text() const;
  std::string pipeline_text() const;
  bool holds_replica_sums() const;
  void log_progress();
  void summarize() const;
  torch::Tensor zero3_evaluate(const std::vector<train::MicroBatch>& micro_batches);
  train::EvalResult validate();
  void report(const char* what, std::int64_t step);

  void say(const std::string& line) const { train_tool::say(comm_, line); }

  const Options& options_;
  Communicator& comm_;
  train::ByteCorpus corpus_;
  TokenSplit train_;
  TokenSplit validation_;
  train::Mesh mesh_;
  train::GptPipeline pipeline_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  train::DistributedSampler sampler_;
  std::unique_ptr<train::DataParallelSync> sync_;  ///< dense models
  std::unique_ptr<MoeGradients> moe_reducers_;     ///< MoE models
  std::unique_ptr<train::ZeroOptimizer> zero_;     ///< --zero 1|2
  std::unique_ptr<train::Zero3> zero3_;            ///< --zero 3
  train::ShardedState state_;                      ///< what the checkpoints hold
  std::vector<StepTime> step_times_;
  std::int64_t step_ = 0;
  double loss_sum_ = 0;
  std::int64_t steps_ = 0;       ///< steps since the last progress line
  std::int64_t loss_steps_ = 0;  ///< of which this rank holds the loss (last stage)
  std::int64_t tokens_ = 0;
  GptClock::time_point interval_start_ = GptClock::now();
};

}  // namespace chorus::train_tool
