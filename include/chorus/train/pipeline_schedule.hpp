// Pipeline schedules as data, and the verifier that runs before any of them executes
// (docs/parallel.md, "Pipeline parallelism").
//
// A schedule is, per pipeline rank, the list of actions that rank performs in order: compute a
// micro-batch on one of its chunks (forward, full backward, or the split backward's input
// gradient and weight gradient), or send / receive a micro-batch's activation or gradient to /
// from a neighbour. The model is cut into S = v·p virtual stages; chunk c of rank r is virtual
// stage c·p + r (Megatron's interleaving; v = 1 is one stage per rank). Activations flow from
// virtual stage s to s + 1, gradients back; neighbours on the same rank (p = 1 with v > 1) hand
// tensors over locally, so the schedule holds no send or receive for them.
//
// The verifier simulates all ranks' lists together: a send never blocks, a receive waits for
// its matching send (matched by kind, micro-batch and stage, as the executor's message tags
// do), a computation waits for its input. It refuses a schedule in which some rank waits
// forever (naming every stuck rank's first stuck action), an action runs before what it needs
// on its own rank (a backward before its forward, W before B), a message is sent but never
// received, or a micro-batch is not computed exactly once per stage; and from per-action costs
// it computes each rank's busy time and the bubble fraction.
#pragma once

#include <chorus/export.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace chorus::train {

enum class PipelineOp {
  Forward,
  Backward,        ///< input and weight gradients together
  BackwardInput,   ///< the split backward's input gradient ("B" of zero-bubble schedules)
  BackwardWeight,  ///< the split backward's weight gradient ("W")
  SendActivation,  ///< this chunk's output to the next virtual stage
  RecvActivation,  ///< this chunk's input from the previous virtual stage
  SendGradient,    ///< the gradient of this chunk's input to the previous virtual stage
  RecvGradient,    ///< the gradient of this chunk's output from the next virtual stage
};

/// "forward", "backward", "backward input", "backward weight", "send activation", ...
CHORUS_EXPORT std::string_view to_string(PipelineOp op) noexcept;

struct PipelineAction {
  PipelineOp op = PipelineOp::Forward;
  int micro_batch = 0;
  int chunk = 0;
  int peer = -1;  ///< the pipeline rank sent to or received from; -1 for computations
  bool operator==(const PipelineAction&) const = default;
};

/// "recv activation of micro-batch 3 on chunk 1 from rank 2".
CHORUS_EXPORT std::string describe(const PipelineAction& action);

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// "gpipe", "1f1b", "interleaved", "zb-h1" (the command line's names).
CHORUS_EXPORT std::string_view to_string(ScheduleKind kind) noexcept;
/// The kind named `name`; InvalidArgument naming it otherwise.
CHORUS_EXPORT ScheduleKind schedule_kind(std::string_view name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int stages = 1;         ///< p, the pipeline ranks
  int micro_batches = 1;  ///< m
  int chunks = 1;         ///< v, chunks per rank: at least 2 for interleaved, else 1
};

struct PipelineSchedule {
  ScheduleOptions options;
  std::vector<std::vector<PipelineAction>> ranks;  ///< one action list per pipeline rank

  int stages() const { return options.stages; }
  int chunks() const { return options.chunks; }
  int micro_batches() const { return options.micro_batches; }
  int virtual_stages() const { return options.stages * options.chunks; }
  int virtual_stage(int rank, int chunk) const { return chunk * options.stages + rank; }
};

/// The schedule of `options`, with its sends and receives. InvalidArgument naming the numbers
/// for a count below 1, chunks other than 1 outside interleaved or below 2 in it, and
/// interleaved with fewer micro-batches than stages.
///
///   GPipe: every forward, then every backward, micro-batches in order.
///   1F1B: rank r runs min(p - r - 1, m) forwards, then alternates forward and backward, then
///     drains its backwards: at most p - r micro-batches in flight.
///   Interleaved 1F1B (Megatron): forwards in groups of p micro-batches per chunk (the first
///     group takes the m mod p extra ones), chunks ascending; backwards in the same groups,
///     chunks descending; rank r warms up with 2(p - r - 1) + (v - 1)·(first group) forwards.
///   ZB-H1: 1F1B with the backward split into B (input gradient) and W (weight gradient);
///     rank r keeps up to r weight gradients pending, so the W's fill the drain and rank r holds
///     at most p micro-batches of state, as 1F1B's first rank.
CHORUS_EXPORT PipelineSchedule make_schedule(const ScheduleOptions& options);

/// Per-action costs, in any unit. A full backward costs backward_input + backward_weight;
/// sends and receives cost nothing (the verifier measures the schedule, not the network).
struct ActionCosts {
  double forward = 1;
  double backward_input = 1;
  double backward_weight = 1;
};

/// One computation as the simulation placed it.
struct TimedAction {
  PipelineAction action;
  double start = 0;
  double end = 0;
};

struct ScheduleReport {
  double makespan = 0;                             ///< when the last rank finishes
  std::vector<double> busy;                        ///< per rank, the sum of its computations' costs
  double bubble = 0;                               ///< Σ_r (makespan − busy_r) / (p · makespan)
  std::vector<std::vector<TimedAction>> timeline;  ///< per rank, its computations in order
};

/// Simulates `schedule`; InvalidArgument with a sentence naming the schedule and the problem
/// (for a deadlock, every stuck rank's first stuck action) when it is refused.
CHORUS_EXPORT ScheduleReport verify_schedule(const PipelineSchedule& schedule,
                                             const ActionCosts& costs = {});

/// The textbook idle fraction of `options` under `costs` (PARALLEL.md section 3): GPipe and
/// 1F1B (p − 1)/(m + p − 1); interleaved (p − 1)/(v·m + p − 1); ZB-H1
/// (p − 1)(F + B − W) / ((p − 1)(F + B − W) + m(F + B + W)), with B the input gradient's cost.
/// The verifier's bubble equals it for every schedule make_schedule builds, whatever the
/// costs; ZB-H1's when m ≥ p and W ≤ min(F, B) (the W's then fit the bubbles).
CHORUS_EXPORT double textbook_bubble(const ScheduleOptions& options, const ActionCosts& costs = {});

/// A text timeline, ranks as rows and time as columns (one per the shortest computation): each
/// computation is its letter (F forward, B backward, I input gradient, W weight gradient), its
/// micro-batch and, when v > 1, its chunk as a letter (a, b, ...), then '-' for the rest of
/// its duration; '.' is idle.
CHORUS_EXPORT std::string render_timeline(const PipelineSchedule& schedule,
                                          const ScheduleReport& report);

/// An SVG picture of `rows` (one per pipeline rank: its computations with their start and end,
/// in any unit, e.g. ScheduleReport::timeline or gather_computations()): ranks as rows, time
/// to the right, each computation a box coloured by its kind (forward, backward, input
/// gradient, weight gradient; a darker shade for odd chunks) and labelled as in
/// render_timeline, with `title` above and a legend below. Each box is one
/// `<rect class="action" data-rank=R data-op=OP data-micro-batch=I data-chunk=C
/// data-start=T0 data-end=T1 ...>`, in row order and, within a row, in the row's order.
CHORUS_EXPORT std::string render_timeline_svg(const std::vector<std::vector<TimedAction>>& rows,
                                              const std::string& title);

}  // namespace chorus::train
