// GptPipeline's construction and accessors; see include/chorus/train/pipeline.hpp.
#include "gpt_pipeline_impl.hpp"

#include <chorus/error.hpp>
#include <chorus/train/pipeline_partition.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <utility>

namespace chorus::train {
namespace {

const PipelineOptions& checked(const PipelineOptions& o, const GptConfig& c,
                               const PipelineGroups& g) {
  const auto n = [](auto v) { return std::to_string(v); };
  const std::size_t stages = static_cast<std::size_t>(o.schedule.stages * o.schedule.chunks);
  require_argument(o.stage_costs.empty() || o.stage_costs.size() == stages,
                   "GptPipeline: " + n(o.stage_costs.size()) + " stage costs for " + n(stages) +
                       " virtual stages");
  const int cp = g.cp ? g.cp->size() : 1;
  require_argument(o.synthetic_compute <= 0 || (!c.sequence_parallel && cp == 1),
                   "GptPipeline: synthetic compute does not reproduce the collectives of " +
                       std::string(c.sequence_parallel ? "sequence parallelism" : "") +
                       (c.sequence_parallel && cp > 1 ? " and " : "") +
                       (cp > 1 ? "cp " + n(cp) : ""));
  require_argument(o.schedule.stages == g.pp.size(),
                   "GptPipeline: a schedule for " + std::to_string(o.schedule.stages) +
                       " stages on a pipeline group of " + std::to_string(g.pp.size()) + " ranks");
  const int p = g.pp.size(), r = g.pp.rank();
  const bool tied = p > 1 && (r == 0 || r == p - 1);
  require_argument(!tied || (g.embedding && g.embedding->size() == 2),
                   "GptPipeline: pipeline rank " + std::to_string(r) + " of " + std::to_string(p) +
                       " holds the tied embedding and needs the embedding group of 2 ranks");
  return o;
}

}  // namespace

std::vector<std::int64_t> gpt_stage_layers(const GptConfig& c, const PipelineOptions& o) {
  const int stages = o.schedule.stages * o.schedule.chunks;
  if (!o.layers_per_stage.empty()) {
    check_partition(o.layers_per_stage, c.layers, stages);
    return o.layers_per_stage;
  }
  const std::int64_t h = c.hidden;
  const std::vector<std::int64_t> block(static_cast<std::size_t>(c.layers), 12 * h * h + 13 * h);
  return balanced_partition(block, stages, (c.vocab + c.sequence) * h, (c.vocab + 2) * h);
}

namespace {

/// What pipeline rank `r` builds of the model: the blocks of its chunks (virtual stage v runs
/// on rank v mod p), the embedding where the first or the last virtual stage runs, the position
/// embedding with the first, the final norm with the last.
GptParts stage_parts(const PipelineSchedule& schedule, int r,
                     const std::vector<std::int64_t>& layers) {
  GptParts parts;
  const int p = schedule.stages(), last = schedule.virtual_stages() - 1;
  for (int v = 0; v <= last; ++v)
    parts.blocks.insert(parts.blocks.end(), static_cast<std::size_t>(layers[v]), v % p == r);
  parts.position_embedding = r == 0;
  parts.final_norm = last % p == r;
  parts.embedding = parts.position_embedding || parts.final_norm;
  return parts;
}

/// Whether `schedule` splits the backward into B and W.
bool splits_backward(const PipelineSchedule& schedule) {
  for (const auto& actions : schedule.ranks)
    for (const PipelineAction& a : actions)
      if (a.op == PipelineOp::BackwardWeight) return true;
  return false;
}

/// Rank `r`'s parts of the model (stage_parts), over the cp (and expert) groups too when there
/// are; its linear layers defer their weight gradients when the schedule has W steps, which
/// flush the whole model's: so such a schedule needs one chunk per rank.
GptModel stage_model(GptConfig c, const PipelineGroups& g, const PipelineSchedule& schedule,
                     const GptParts& parts) {
  c.defer_weight_gradients = splits_backward(schedule);
  require_argument(!c.defer_weight_gradients || schedule.chunks() == 1,
                   "GptPipeline: a schedule with weight-gradient steps needs one chunk per "
                   "rank; it has " +
                       std::to_string(schedule.chunks()));
  if (g.ep) {
    require_argument(g.cp.has_value(),
                     "GptPipeline: an expert group needs the cp group too (of "
                     "one rank without context parallelism)");
    return GptModel(c, g.tp, *g.cp, *g.ep, parts);
  }
  return g.cp ? GptModel(c, g.tp, *g.cp, parts) : GptModel(c, g.tp, parts);
}

/// The block index of a "layers.<i>.…" name, else -1.
std::int64_t block_of(const std::string& name) {
  const std::string prefix = "layers.";
  if (name.rfind(prefix, 0) != 0) return -1;
  return std::stoll(name.substr(prefix.size(), name.find('.', prefix.size()) - prefix.size()));
}

}  // namespace

GptPipeline::Impl::Impl(const GptConfig& c, const PipelineGroups& g, const PipelineOptions& o)
    : config(c),
      groups(g),
      options(checked(o, c, g)),
      schedule(make_schedule(o.schedule)),
      report(verify_schedule(schedule, o.costs)),
      layers(gpt_stage_layers(c, o)),
      model(stage_model(c, g, schedule, stage_parts(schedule, g.pp.rank(), layers))) {
  std::int64_t next = 0;
  for (std::int64_t n : layers) first.push_back(std::exchange(next, next + n));
  const auto& actions = schedule.ranks[static_cast<std::size_t>(rank())];
  last_gradient_action.assign(static_cast<std::size_t>(schedule.chunks()), 0);
  for (std::size_t k = 0; k < actions.size(); ++k)
    if (actions[k].op == PipelineOp::Backward || actions[k].op == PipelineOp::BackwardWeight)
      last_gradient_action[static_cast<std::size_t>(actions[k].chunk)] = k;
}

bool GptPipeline::Impl::stage_owns(const std::string& name, int s) const {
  const std::int64_t b = block_of(name);
  if (b >= 0) return b >= first[s] && b < first[s] + layers[s];
  if (name == "embedding.weight") return s == 0 || s == last_stage();
  if (name == "position_embedding.weight") return s == 0;
  return s == last_stage();  // the final norm
}

std::vector<MicroBatch> split_micro_batches(const at::Tensor& tokens, const at::Tensor& targets,
                                            int count) {
  require_argument(tokens.defined() && tokens.dim() == 2 && targets.defined() &&
                       targets.sizes() == tokens.sizes(),
                   "split_micro_batches: tokens and targets must both be [s, b]");
  const std::int64_t b = tokens.size(1);
  require_argument(count >= 1 && b % count == 0,
                   "split_micro_batches: a batch of " + std::to_string(b) +
                       " samples does not split into " + std::to_string(count) + " micro-batches");
  std::vector<MicroBatch> out;
  const std::int64_t n = b / count;
  for (int i = 0; i < count; ++i)
    out.push_back({tokens.narrow(1, i * n, n), targets.narrow(1, i * n, n)});
  return out;
}

double measured_bubble(const Group& pp, const PipelineRecord& record) {
  double busy_and_end[2] = {0, 0};
  for (const TimedAction& t : record.computations) {
    busy_and_end[0] += t.end - t.start;
    busy_and_end[1] = std::max(busy_and_end[1], t.end);
  }
  Communicator comm = pp.comm;
  double busy = 0, makespan = 0;
  comm.all_reduce(&busy_and_end[0], &busy, 1, DataType::Float64, ReduceOp::Sum);
  comm.all_reduce(&busy_and_end[1], &makespan, 1, DataType::Float64, ReduceOp::Max);
  return makespan > 0 ? 1 - busy / (pp.size() * makespan) : 0;
}

std::vector<std::vector<TimedAction>> gather_computations(const Group& pp,
                                                          const PipelineRecord& record) {
  // Each computation as 6 doubles: op, micro-batch, chunk, start, end, and 1 (0 pads a row).
  constexpr std::size_t kFields = 6;
  Communicator comm = pp.comm;
  const auto size = static_cast<std::size_t>(pp.size());
  double mine = static_cast<double>(record.computations.size()), longest = 0;
  comm.all_reduce(&mine, &longest, 1, DataType::Float64, ReduceOp::Max);
  const auto width = static_cast<std::size_t>(longest) * kFields;
  std::vector<double> send(width, 0), all(width * size, 0);
  for (std::size_t k = 0; k < record.computations.size(); ++k) {
    const TimedAction& t = record.computations[k];
    const double fields[kFields] = {static_cast<double>(t.action.op),
                                    double(t.action.micro_batch),
                                    double(t.action.chunk),
                                    t.start,
                                    t.end,
                                    1};
    std::copy(fields, fields + kFields, send.begin() + static_cast<std::ptrdiff_t>(k * kFields));
  }
  if (width > 0) comm.all_gather(send.data(), all.data(), width, DataType::Float64);
  std::vector<std::vector<TimedAction>> rows(size);
  for (std::size_t r = 0; r < size; ++r)
    for (std::size_t k = 0; k < width; k += kFields) {
      const double* f = all.data() + r * width + k;
      if (f[5] == 0) break;
      const PipelineAction a{static_cast<PipelineOp>(static_cast<int>(f[0])),
                             static_cast<int>(f[1]), static_cast<int>(f[2]), -1};
      rows[r].push_back({a, f[3], f[4]});
    }
  return rows;
}

GptPipeline::GptPipeline(const GptConfig& config, const PipelineGroups& groups,
                         const PipelineOptions& options)
    : impl_(std::make_unique<Impl>(config, groups, options)) {}
GptPipeline::~GptPipeline() = default;
GptPipeline::GptPipeline(GptPipeline&&) noexcept = default;
GptPipeline& GptPipeline::operator=(GptPipeline&&) noexcept = default;

at::Tensor GptPipeline::forward_backward(const std::vector<MicroBatch>& micro_batches,
                                         GradientReducer* reducer,
                                         const DropoutPosition& position) {
  return impl_->step(micro_batches, reducer, position);
}

std::vector<GptParameter> GptPipeline::named_parameters() const {
  return impl_->model.named_parameters();  // the stage's parts only
}

at::Tensor GptPipeline::evaluate(const std::vector<MicroBatch>& micro_batches) {
  return impl_->evaluate(micro_batches);
}

std::vector<at::Tensor> GptPipeline::partial_gradient_parameters() const {
  return impl_->model.partial_gradient_parameters();
}

std::vector<NormPiece> GptPipeline::norm_pieces(std::size_t replicated) const {
  using Place = GradPlacement;
  std::vector<NormPiece> out;
  const bool second_copy = impl_->p() > 1 && impl_->holds_last();
  for (const GptParameter& q : named_parameters()) {
    const Place over_tp = q.shard_dim >= 0 ? Place::Sharded : Place::Replicated;
    // Replicated over pp: counted by pipeline rank 0 only (the tied embedding's first copy).
    const Place over_pp =
        second_copy && q.name == "embedding.weight" ? Place::Replicated : Place::Sharded;
    std::vector<Place> placements{over_tp, over_pp};
    placements.resize(2 + replicated, Place::Replicated);
    out.push_back({q.tensor.grad(), std::move(placements)});
  }
  return out;
}

std::vector<at::Tensor> GptPipeline::parameters() const {
  std::vector<at::Tensor> out;
  for (const GptParameter& p : named_parameters()) out.push_back(p.tensor);
  return out;
}

bool GptPipeline::holds_loss() const { return impl_->holds_last(); }
const PipelineSchedule& GptPipeline::schedule() const { return impl_->schedule; }
const ScheduleReport& GptPipeline::report() const { return impl_->report; }
const PipelineRecord& GptPipeline::last_record() const { return impl_->record; }
const std::vector<std::int64_t>& GptPipeline::layers_per_stage() const { return impl_->layers; }
const GptModel& GptPipeline::model() const { return impl_->model; }

}  // namespace chorus::train
