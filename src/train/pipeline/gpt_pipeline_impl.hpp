// GptPipeline's state, shared by its construction (gpt_pipeline.cpp) and its step
// (gpt_pipeline_step.cpp).
#pragma once

#include "messages.hpp"

#include <chorus/train/pipeline.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace chorus::train {

/// What one micro-batch leaves on one chunk between its actions.
struct MicroBatchSlot {
  at::Tensor input;        ///< the received activation (a leaf that requires grad); stage > 0
  at::Tensor output;       ///< this chunk's output; not on the last virtual stage
  at::Tensor loss;         ///< the scaled loss; on the last virtual stage only
  at::Tensor output_grad;  ///< the gradient of output, received
  at::Tensor input_grad;   ///< the gradient of input, to send
};

struct GptPipeline::Impl {
  GptConfig config;
  PipelineGroups groups;
  PipelineOptions options;
  PipelineSchedule schedule;
  ScheduleReport report;
  std::vector<std::int64_t> layers;  ///< blocks per virtual stage
  std::vector<std::int64_t> first;   ///< the first block of each virtual stage
  GptModel model;
  /// Per chunk, the index in this rank's action list of its last backward or W: after it the
  /// chunk's gradients are final.
  std::vector<std::size_t> last_gradient_action;

  // One step's (or evaluation's) state.
  const std::vector<MicroBatch>* batch = nullptr;
  int tag_span = 1;      ///< micro-batches of the current run: distinct tags for each
  double tokens = 0;     ///< all micro-batches' tokens: the loss's divisor
  at::Tensor step_loss;  ///< the sum of the scaled micro-batch losses so far
  std::vector<std::vector<MicroBatchSlot>> slots;  ///< [chunk][micro-batch]
  std::vector<detail::PendingSend> sends;
  /// A receive posted ahead of need, and when (seconds()).
  struct Posted {
    detail::PendingRecv recv;
    double at = 0;
  };
  /// Receives posted ahead of need, by the index of their action in the running list.
  std::map<std::size_t, Posted> posted;
  std::chrono::steady_clock::time_point began;  ///< when the running list began
  PipelineRecord record;                        ///< of the running (or last) list
  GradientReducer* reducer = nullptr;           ///< forward_backward's, for the step
  DropoutPosition position;                     ///< forward_backward's: micro-batch 0's masks
  std::vector<std::int64_t> first_samples;      ///< per micro-batch: samples before it

  Impl(const GptConfig& c, const PipelineGroups& g, const PipelineOptions& o);

  int p() const { return schedule.stages(); }
  int rank() const { return groups.pp.rank(); }
  int stage(int chunk) const { return schedule.virtual_stage(rank(), chunk); }
  int last_stage() const { return schedule.virtual_stages() - 1; }
  bool holds_first() const { return rank() == 0; }
  bool holds_last() const { return rank() == p() - 1; }
  /// Whether virtual stage `stage` trains the parameter called `name`.
  bool stage_owns(const std::string& name, int stage) const;

  at::Tensor step(const std::vector<MicroBatch>& micro_batches, GradientReducer* reducer,
                  const DropoutPosition& position);
  at::Tensor evaluate(const std::vector<MicroBatch>& micro_batches);
  /// Runs `actions` over `micro_batches` (checked) and returns the loss they summed; aborts
  /// the pipeline group when one fails.
  at::Tensor run_all(const std::vector<PipelineAction>& actions,
                     const std::vector<MicroBatch>& micro_batches);
  /// Runs action `k` of `actions`.
  void run(const std::vector<PipelineAction>& actions, std::size_t k);
  /// Before computation `k`: posts the receives between it and the next computation, so that
  /// their messages land while it runs (only those: a request completes after every request
  /// issued before it, and a later receive may wait for this rank's next sends).
  void post_ahead(const std::vector<PipelineAction>& actions, std::size_t k);
  /// Receive action `k`'s tensor: its posted receive finished, or received now.
  at::Tensor receive(const PipelineAction& a, std::size_t k);
  Posted post(const PipelineAction& a) const;
  double seconds() const;
  /// A computation replaced by its sleep (PipelineOptions::synthetic_compute).
  void synthetic(const PipelineAction& a);
  void forward(int i, int chunk);
  void backward(int i, int chunk, PipelineOp op);
  void hand_over_input_grad(int i, int chunk);
  detail::ExpectedTensor expected(const char* what, int i, int from, int to) const;
  int tag(int kind, int to_stage, int i) const;
  void reduce_tied_embedding();
  /// After the tied embedding's all-reduce failed: what the pipeline group says went wrong
  /// (" (pipeline group: rank 1 (pid 7) died)"), or "" when it says nothing; aborts it.
  std::string pipeline_cause();
  /// Marks chunk `chunk`'s parameters ready in the reducer, the tied embedding left out.
  void mark_chunk_ready(int chunk);
};

}  // namespace chorus::train
