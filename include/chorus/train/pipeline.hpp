// Pipeline parallelism for the GPT model (docs/parallel.md, "Pipeline parallelism").
//
// The model's blocks are cut into v·p virtual stages (pipeline_partition.hpp); virtual stage
// c·p + r is chunk c of pipeline rank r (pipeline_schedule.hpp). The first virtual stage also
// embeds the tokens, the last also applies the final LayerNorm, the tied logits and the loss.
// A step runs this rank's action list of a verified schedule: activations and gradients move
// between neighbour stages as shape-and-dtype-carrying messages over the pipeline group
// (non-blocking sends, receives posted ahead of need, each matched by a tag naming its kind,
// micro-batch and stage);
// parameter gradients accumulate over the micro-batches; the loss of micro-batch i is
// Σ token losses_i / (tokens of all micro-batches), so the step's loss — their sum — and the
// gradients equal the one-process model's on the whole batch. With tied embeddings across
// stages, the first and last stage each hold the embedding and, after the last action, sum its
// gradient over the embedding group (PARALLEL.md section 2).
//
// Every rank builds only its chunks' parts of the GptModel (GptParts: their blocks, and the
// embedding, position embedding or final norm where its stages need them), with the values of
// the whole model's (the init is layout-independent), and trains them: named_parameters().
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline_schedule.hpp>
#include <chorus/train/reducer.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace chorus::train {

struct PipelineOptions {
  ScheduleOptions schedule;  ///< schedule.stages must be the pipeline group's size
  /// Blocks per virtual stage, in virtual-stage order (v·p entries); empty: balanced by
  /// parameter count (balanced_partition, the embedding counted on the first and last stage).
  std::vector<std::int64_t> layers_per_stage;
  ActionCosts costs;  ///< for the verifier's bubble (report())
  /// Per virtual stage, the costs of its computations under synthetic_compute (v·p entries);
  /// empty: `costs` for every stage.
  std::vector<ActionCosts> stage_costs;
  /// Seconds per unit of `costs` (or stage_costs); above 0 every computation is replaced by a
  /// sleep of its cost (a full backward: backward_input + backward_weight) that leaves zeros
  /// where it would leave an activation or a gradient, while the communication stays real:
  /// the messages between stages, each block's two all-reduces over tp (with tp > 1) of its
  /// activation after a forward and of its gradient after a backward or B (plus the
  /// embedding's on the first stage's forward and the head's on the last stage's backward),
  /// and the gradients' reduction: so ranks that share cores show the schedule's own bubble.
  /// A backward (or W) leaves zero gradients on its chunk's parameters, the last stage's
  /// forward a loss of zero. Not with sequence parallelism or cp (their collectives are not
  /// reproduced): InvalidArgument at construction.
  double synthetic_compute = 0;
};

/// The groups a pipeline runs on. `embedding` ({first, last stage}, Mesh::embedding()) is
/// needed on the first and last stage's ranks when pp > 1, and ignored elsewhere.
struct PipelineGroups {
  Group pp;
  Group tp;
  std::optional<Group> embedding;
  /// Ulysses context parallelism inside every stage (GptModel's cp group), or none. Each
  /// stage then passes its cp rank's s/u rows on, and the loss covers the rank's tokens: the
  /// gradients summed over cp are the whole sequence's, the returned loss is summed over cp.
  std::optional<Group> cp;
  /// The expert group of the model's MoE blocks (GptConfig::moe), or none (a dense model);
  /// with it, cp must be given (a group of one rank without context parallelism).
  /// The MoE losses of each micro-batch weigh 1/m, like its share of the cross-entropy.
  std::optional<Group> ep = std::nullopt;
};

/// One micro-batch: int64 tokens and targets [s, b]; s and b may differ between micro-batches.
struct MicroBatch {
  at::Tensor tokens;
  at::Tensor targets;
};

/// `tokens` and `targets` [s, B] cut along b into `count` micro-batches of B/count samples;
/// InvalidArgument naming the numbers when B is not a multiple of count.
CHORUS_EXPORT std::vector<MicroBatch> split_micro_batches(const at::Tensor& tokens,
                                                          const at::Tensor& targets, int count);

/// Blocks per virtual stage of `config`'s model under `options` (GptPipeline's partition):
/// options.layers_per_stage checked, or balanced by parameter count. InvalidArgument naming the
/// numbers when there are fewer blocks than virtual stages or the explicit list does not fit.
CHORUS_EXPORT std::vector<std::int64_t> gpt_stage_layers(const GptConfig& config,
                                                         const PipelineOptions& options);

/// What one run of a rank's actions (a forward_backward or an evaluate) did, in seconds since
/// it began: each computation's start and end, and each receive's start (when its receive was
/// posted, ahead of need where the schedule lets it) and end (when its tensor had arrived).
struct PipelineRecord {
  std::vector<TimedAction> computations;
  std::vector<TimedAction> receives;
};

/// The measured bubble of the pipeline ranks' last runs, from their records: 1 − Σ_r busy_r /
/// (p · makespan), busy_r the sum of rank r's computation times and the makespan the latest
/// end of a computation on any rank. Each record counts from its own rank's start, so the
/// starts must be aligned (a barrier on `pp` before the run). Collective over `pp`.
CHORUS_EXPORT double measured_bubble(const Group& pp, const PipelineRecord& record);

/// Every pipeline rank's computations in its last run, row r for pipeline rank r (each in its
/// own rank's seconds, so aligned when the run began after a barrier on `pp`), on every rank:
/// what render_timeline_svg draws of a real run. Collective over `pp`.
CHORUS_EXPORT std::vector<std::vector<TimedAction>> gather_computations(
    const Group& pp, const PipelineRecord& record);

class CHORUS_EXPORT GptPipeline {
 public:
  /// Collective-free. Builds the schedule and verifies it, cuts the blocks, builds the model.
  /// InvalidArgument naming the numbers when the schedule's stages differ from the pipeline
  /// group's size, the schedule is refused, there are fewer blocks than virtual stages or an
  /// explicit partition does not fit, or the embedding group is missing where it is needed.
  GptPipeline(const GptConfig& config, const PipelineGroups& groups,
              const PipelineOptions& options);
  ~GptPipeline();
  GptPipeline(GptPipeline&&) noexcept;
  GptPipeline& operator=(GptPipeline&&) noexcept;

  /// Runs one step's forward and backward over `micro_batches` (schedule.micro_batches of
  /// them, the same on every pipeline rank), accumulating into this rank's parameters'
  /// gradients (zero them between steps). Returns the step's loss on the ranks that hold the
  /// last virtual stage, an undefined tensor elsewhere. A failure during the actions (a
  /// message of another shape than expected: InvalidArgument naming both stages and shapes; a
  /// lost peer) aborts the pipeline group, so that the other stages fail promptly instead of
  /// waiting for CHORUS_TIMEOUT; the pipeline cannot run another step after that.
  ///
  /// With a `reducer` (over this rank's parameters(), autograd_hooks off, its step begun by the
  /// caller, who calls finish_step() after), each parameter is marked ready as soon as its
  /// gradient is final, so the reduction over dp overlaps the rest of the step (the drain): a
  /// chunk's parameters after the chunk's last backward (or W) action, the tied embedding
  /// after its sum over the embedding group.
  ///
  /// `position` keys the dropout masks (GptModel::set_step): micro-batch i's forward passes
  /// draw them at `position` with first_sample moved past the samples of micro-batches 0..i-1,
  /// so that they are the masks of the whole batch in one pass.
  at::Tensor forward_backward(const std::vector<MicroBatch>& micro_batches,
                              GradientReducer* reducer = nullptr,
                              const DropoutPosition& position = {});

  /// Forward only, without autograd and without dropout: the mean token loss over `micro_batches`
  /// (any number of them, of any shapes, the same on every pipeline rank), each passing the virtual
  /// stages in order, on the ranks that hold the last virtual stage; an undefined tensor elsewhere.
  /// Collective over the pipeline group; a failure aborts it, as in forward_backward.
  at::Tensor evaluate(const std::vector<MicroBatch>& micro_batches);

  /// This rank's parameters (its chunks'), with their logical names.
  std::vector<GptParameter> named_parameters() const;
  std::vector<at::Tensor> parameters() const;
  /// This rank's parameters whose gradients must be summed over tp (GptModel's
  /// partial_gradient_parameters).
  std::vector<at::Tensor> partial_gradient_parameters() const;
  /// This rank's gradients as pieces of the global gradient, for global_grad_norm and
  /// clip_grad_norm over the groups {tp, pp, then `replicated` more}: tp-sharded or
  /// replicated as the model holds them, different on every pipeline rank, and the same on
  /// every rank of each further group (dp once reduced). The tied embedding, held by the first
  /// and the last stage with the same gradient after a step, is counted by the first only.
  std::vector<NormPiece> norm_pieces(std::size_t replicated = 0) const;
  /// True on the ranks that hold the last virtual stage (and so return the loss).
  bool holds_loss() const;
  const PipelineSchedule& schedule() const;
  /// The verifier's report of the schedule (its bubble under options.costs).
  const ScheduleReport& report() const;
  /// This rank's record of the last forward_backward or evaluate.
  const PipelineRecord& last_record() const;
  /// Blocks per virtual stage.
  const std::vector<std::int64_t>& layers_per_stage() const;
  /// The model's parts this rank built (GptParts).
  const GptModel& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::train
