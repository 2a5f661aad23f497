// The GPT run of chorus-train: the model split over the mesh's tp and cp groups and run as a
// pipeline over its pp group (GptPipeline; one stage at --pp 1), its gradients summed over cp
// and averaged over dp by the gradient reducer over the dp_cp group (ZeRO-1/2: reduce-scattered
// over it, the optimizer stepping this rank's shards), samples of --seq-len + 1 bytes of the
// fortunes corpus (see gpt_trainer.hpp and docs/training.md).
#include "gpt_trainer.hpp"

#include "gpt_moe.hpp"
#include "gpt_pipeline_setup.hpp"
#include "run_state.hpp"
#include "tasks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/data.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline.hpp>
#include <chorus/train/reducer.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace chorus::train_tool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kClipNorm = 1.0;          ///< global gradient norm clipping
constexpr std::size_t kEvalChunk = 32;     ///< validation samples per forward pass
constexpr std::int64_t kVocabulary = 256;  ///< byte-level tokens

/// The mesh of a tp × cp × dp × pp run, after refusing degrees that do not fit the world.
train::Mesh make_mesh(const Options& options, const Communicator& comm) {
  const int model = options.tp * options.pp, world = comm.size(), cp = options.cp;
  require_argument(world % model == 0,
                   "--tp " + std::to_string(options.tp) + " x --pp " + std::to_string(options.pp) +
                       " does not divide the world of " + std::to_string(world) +
                       " ranks (the data-parallel degree is world / (tp x cp x pp))");
  require_argument((world / model) % cp == 0,
                   "--cp " + std::to_string(cp) +
                       " does not divide world / (tp x pp) = " + std::to_string(world / model) +
                       " ranks (the data-parallel degree is world / (tp x cp x pp))");
  const std::string cp_text = cp > 1 ? " x --cp " + std::to_string(cp) : "";
  require_argument(options.dp == 0 || options.dp * model * cp == world,
                   "--dp " + std::to_string(options.dp) + " x --tp " + std::to_string(options.tp) +
                       cp_text + " x --pp " + std::to_string(options.pp) + " is not the world of " +
                       std::to_string(world) + " ranks");
  train::MeshOptions mesh;
  mesh.degrees.tp = options.tp;
  mesh.degrees.cp = cp;
  mesh.degrees.pp = options.pp;
  mesh.degrees.dp = world / (model * cp);
  mesh.degrees.ep = options.ep;
  mesh.embedding_group = options.pp > 1;
  return train::Mesh(comm, mesh);
}

/// The reducer's options (DataParallelSync: over dp_cp, the sum over cp and the mean over dp;
/// over cp alone in the steps --no-sync and --alternate-sync leave unsynchronised).
/// Micro-batches accumulate into the gradients: parameters are marked ready explicitly, by
/// the pipeline.
train::ReducerOptions reducer_options(const Options& options) {
  auto reducer = sync_options<train::ReducerOptions>(options);
  reducer.autograd_hooks = false;
  return reducer;
}

/// ZeRO-1/2 over dp_cp (as the reducer: the sum over cp divided by dp). Parameters are marked
/// ready once the step's backward and the tp sums of partial gradients have run; the ranks'
/// parameters are equal from the layout-independent initialisation (no broadcast).
train::ZeroOptions zero_options(const Options& options, const train::Mesh& mesh) {
  auto zero = sync_options<train::ZeroOptions>(options);
  zero.stage = options.zero;
  zero.autograd_hooks = false;
  zero.broadcast_parameters = false;
  zero.divisor = mesh.layout().dp;
  zero.mixed_precision = mixed_precision(options);
  return zero;
}

train::PipelineGroups pipeline_groups(const train::Mesh& mesh, const Options& options) {
  const int p = mesh.layout().pp, stage = mesh.coordinates().pp;
  std::optional<train::Group> embedding;
  if (p > 1 && (stage == 0 || stage == p - 1)) embedding = mesh.embedding();
  std::optional<train::Group> cp;
  if (mesh.layout().cp > 1 || options.moe_experts > 0) cp = mesh.cp();
  std::optional<train::Group> ep;
  if (options.moe_experts > 0) ep = mesh.expert();
  return {mesh.pp(), mesh.tp(), embedding, cp, ep};
}

train::GptConfig gpt_config(const Options& options) {
  train::GptConfig c;
  c.layers = options.layers;
  c.hidden = options.hidden;
  c.heads = options.heads;
  c.vocab = kVocabulary;
  c.sequence = options.seq_len;
  c.sequence_parallel = options.sequence_parallel;
  c.seed = options.seed;
  c.dropout = options.dropout;
  c.moe = moe_config(options);
  c.recompute = options.recompute == Recomputation::Full        ? train::Recompute::Full
                : options.recompute == Recomputation::Selective ? train::Recompute::Selective
                                                                : train::Recompute::None;
  return c;
}

/// A split of the corpus as samples: sample i is bytes [i·s, i·s + s + 1) (inputs and the
/// targets shifted by one), non-overlapping.
struct TokenSplit {
  torch::Tensor bytes;  ///< int64
  std::int64_t seq_len = 0;

  TokenSplit(const std::vector<std::uint8_t>& data, std::int64_t s) : seq_len(s) {
    bytes = torch::from_blob(const_cast<std::uint8_t*>(data.data()),
                             {static_cast<std::int64_t>(data.size())}, torch::kUInt8)
                .to(torch::kInt64);
  }
  std::size_t samples() const {
    return bytes.size(0) < 1 ? 0 : static_cast<std::size_t>((bytes.size(0) - 1) / seq_len);
  }
  /// Tokens and targets [s, b] of the samples `indices`.
  std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<std::size_t>& indices) const {
    std::vector<torch::Tensor> rows;
    for (std::size_t i : indices) {
      rows.push_back(bytes.narrow(0, static_cast<std::int64_t>(i) * seq_len, seq_len + 1));
    }
    const torch::Tensor windows = torch::stack(rows).t();  // [s + 1, b]
    return {windows.narrow(0, 0, seq_len).contiguous(), windows.narrow(0, 1, seq_len).contiguous()};
  }
};

/// "; dropout P, recompute R" when either is on, else "".
std::string dropout_text(const Options& o) {
  if (o.dropout == 0 && o.recompute == Recomputation::None) return "";
  char text[80];
  std::snprintf(text, sizeof text, "; dropout %g, recompute %s", o.dropout,
                recomputation_name(o.recompute).c_str());
  return text;
}

class GptTrainer {
 public:
  GptTrainer(const Options& options, Communicator& comm)
      : options_(options),
        comm_(comm),
        corpus_(
            train::load_fortunes(options.corpus.empty() ? train::kFortunesDir : options.corpus)),
        train_(corpus_.train, options.seq_len),
        validation_(corpus_.validation, options.seq_len),
        mesh_(make_mesh(options, comm)),
        pipeline_(gpt_config(options), pipeline_groups(mesh_, options),
                  pipeline_options(options, gpt_config(options), &comm)),
        // Under ZeRO the optimizer is ZeroOptimizer's or Zero3's, over the shards.
        optimizer_(options.zero > 0 ? nullptr : make_optimizer(options, pipeline_.parameters())),
        sampler_(train_.samples(), mesh_.coordinates().dp, mesh_.layout().dp, options.seed) {
    require_argument(
        train_.samples() > 0 && validation_.samples() > 0,
        "the corpus has too few bytes for --seq-len " + std::to_string(options.seq_len));
    if (options.zero == 3) {
      train::Zero3Options zero;
      zero.overlap_backward = options.overlap;
      zero.mixed_precision = mixed_precision(options);
      zero3_ = std::make_unique<train::Zero3>(
          pipeline_.model().parameters(), train::gpt_units(pipeline_.model()), mesh_.dp(),
          [&](std::vector<torch::Tensor> shards) {
            return make_optimizer(options, std::move(shards));
          },
          zero);
      state_ = train::gpt_zero3_state(pipeline_.model(), *zero3_);
      restore();
      return;
    }
    if (options.zero > 0) {
      zero_ = std::make_unique<train::ZeroOptimizer>(
          pipeline_.parameters(), mesh_.data_context(),
          [&](std::vector<torch::Tensor> shards) {
            return make_optimizer(options, std::move(shards));
          },
          zero_options(options, mesh_));
      state_ = train::gpt_zero_state(pipeline_.named_parameters(), pipeline_.model().config(),
                                     mesh_.tp(), *zero_);
      restore();
      return;
    }
    state_ = train::gpt_replicated_state(pipeline_.named_parameters(), pipeline_.model().config(),
                                         mesh_.tp(), *optimizer_, mesh_.data_context());
    restore();
    if (options.moe_experts > 0) {  // experts over edp, the rest over dp·cp; both over dp
      auto moe = reducer_options(options_);
      moe.divisor = mesh_.layout().dp;
      moe_reducers_ = std::make_unique<MoeGradients>(pipeline_.named_parameters(), mesh_, moe);
    } else {
      sync_ = std::make_unique<train::DataParallelSync>(
          pipeline_.parameters(), mesh_, reducer_options(options_),
          options_.no_sync || options_.alternate_sync > 0);
    }
  }

  void train() {
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

  /// "summary steps=S tokens_per_s=T step_ms_median=M [unsynced_step_ms_median=U]": rank 0's
  /// median step time (warm-up left out) and the global tokens/s it implies.
  void summarize() const {
    const StepMedians medians = step_medians(step_times_);
    if (medians.synced == 0) return;
    const double tokens =
        static_cast<double>(options_.batch * options_.seq_len * mesh_.layout().dp);
    char line[200];
    std::snprintf(line, sizeof line, "summary steps=%lld tokens_per_s=%.1f step_ms_median=%.2f",
                  static_cast<long long>(step_), tokens / medians.synced, medians.synced * 1e3);
    say(std::string(line).append(unsynced_median_text(medians)));
  }

  /// The final line: validation loss and perplexity over the --eval-windows samples.
  void evaluate() { report("final validation", -1); }

 private:
  std::string describe() const {
    const auto& c = pipeline_.model().config();
    return "model: gpt layers " + std::to_string(c.layers) + " hidden " + std::to_string(c.hidden) +
           " heads " + std::to_string(c.heads) + " seq-len " + std::to_string(c.sequence) +
           " vocab 256" + dropout_text(options_) + moe_description(options_, mesh_) + "; tp " +
           std::to_string(mesh_.layout().tp) + (c.sequence_parallel ? " (sequence parallel)" : "") +
           (mesh_.layout().cp > 1 ? " x cp " + std::to_string(mesh_.layout().cp) : "") + " x dp " +
           std::to_string(mesh_.layout().dp) + pipeline_text() + " x batch " +
           std::to_string(options_.batch) + zero_text() +
           (options_.no_sync ? ", no gradient sync over dp" : "") + "; corpus " +
           std::to_string(corpus_.train.size()) + " train bytes (" +
           std::to_string(corpus_.train_documents) + " fortunes), " +
           std::to_string(corpus_.validation.size()) + " validation bytes (" +
           std::to_string(corpus_.validation_documents) + ")";
  }

  /// " (ZeRO-Z)" under --zero Z, else "".
  std::string zero_text() const {
    return options_.zero > 0 ? " (ZeRO-" + std::to_string(options_.zero) + ")" : "";
  }

  /// " x pp P (S, v V, L blocks per stage) in M micro-batches", or what of it applies.
  std::string pipeline_text() const {
    std::string text;
    if (mesh_.layout().pp > 1) {
      std::string blocks;
      for (std::int64_t n : pipeline_.layers_per_stage())
        blocks.append(blocks.empty() ? "" : "/").append(std::to_string(n));
      text = " x pp " + std::to_string(mesh_.layout().pp) + " (" + options_.schedule +
             (options_.virtual_stages > 1 ? ", v " + std::to_string(options_.virtual_stages) : "") +
             ", blocks " + blocks + ")";
    }
    if (options_.micro_batches > 1)
      text += " in " + std::to_string(options_.micro_batches) + " micro-batches";
    return text;
  }

  bool next_epoch_if_done() {
    if (!sampler_.epoch_done()) return true;
    if (sampler_.epoch() + 1 >= static_cast<std::uint64_t>(options_.epochs)) return false;
    sampler_.set_epoch(sampler_.epoch() + 1);
    return true;
  }

  void train_step(const std::vector<std::size_t>& indices) {
    const auto [tokens, targets] = train_.batch(indices);
    if (zero3_) {
      zero3_step(tokens, targets);
      return;
    }
    const auto start = Clock::now();
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
        {std::chrono::duration<double>(Clock::now() - start).count(), !alternate_skip});
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

  /// Without ZeRO: each chunk's gradients are reduced over dp_cp (cp alone in a step without
  /// dp sync) as soon as its last backward has run (MoE: all at the step's end), clipped over
  /// the replicas and stepped. Returns the pipeline's loss.
  torch::Tensor replicated_step(const std::vector<train::MicroBatch>& micro_batches,
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
                            {mesh_.tp(), mesh_.pp(), mesh_.expert(), mesh_.expert_data()},
                            kClipNorm);
    } else {
      train::clip_grad_norm(pipeline_.norm_pieces(1),
                            {mesh_.tp(), mesh_.pp(), sync_->replica_group()}, kClipNorm);
    }
    optimizer_->step();
    return loss;
  }

  /// ZeRO-1/2 over dp_cp: the step's gradients (their tp partial sums taken first) are
  /// reduce-scattered once the pipeline's backward has run, the global norm is clipped over
  /// the shards (tp and pp placements as the model holds them), the optimizer steps this
  /// rank's shards and the parameters are all-gathered. Returns the pipeline's loss.
  torch::Tensor sharded_step(const std::vector<train::MicroBatch>& micro_batches,
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
  void zero3_step(const torch::Tensor& tokens, const torch::Tensor& targets) {
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

  /// ZeRO-3's validation: the mean token loss over `micro_batches`, unit by unit. Every rank
  /// runs as many forward passes (the gathers are collective): a rank with fewer batches runs
  /// its first (or an empty replica a one-sample batch) again and leaves it out.
  torch::Tensor zero3_evaluate(const std::vector<train::MicroBatch>& micro_batches) {
    double counts[1] = {static_cast<double>(micro_batches.size())};
    comm_.all_reduce(counts, counts, 1, DataType::Float64, ReduceOp::Max);
    const auto [x0, y0] = validation_.batch({0});
    double sum = 0, tokens = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(counts[0]); ++i) {
      const bool own = i < micro_batches.size();
      const train::MicroBatch& mb = own ? micro_batches[i] : train::MicroBatch{x0, y0};
      const double loss =
          train::gpt_loss(pipeline_.model(), *zero3_, mb.tokens, mb.targets).item<double>();
      if (!own) continue;
      sum += loss * static_cast<double>(mb.tokens.numel());
      tokens += static_cast<double>(mb.tokens.numel());
    }
    return tokens > 0 ? torch::tensor(sum / tokens, torch::kDouble) : torch::Tensor();
  }

  /// Whether this rank counts its replica's tokens and validation sums: one rank of each
  /// tp × cp block (each of them sees the whole batch and the same loss).
  bool holds_replica_sums() const {
    return mesh_.coordinates().tp == 0 && mesh_.coordinates().cp == 0;
  }

  /// "epoch E step S loss L tokens/s T": the mean loss of the steps since the last line over
  /// every replica, and the global tokens per second.
  void log_progress() {
    std::array<double, 3> sums = {loss_sum_, static_cast<double>(loss_steps_),
                                  static_cast<double>(tokens_)};
    comm_.all_reduce(sums.data(), sums.data(), sums.size(), DataType::Float64, ReduceOp::Sum);
    const double elapsed = std::chrono::duration<double>(Clock::now() - interval_start_).count();
    char line[200];
    std::snprintf(line, sizeof line, "epoch %llu step %lld loss %.9g tokens/s %.1f",
                  static_cast<unsigned long long>(sampler_.epoch()), static_cast<long long>(step_),
                  sums[0] / sums[1], sums[2] / elapsed);
    const std::string moe =
        options_.moe_experts > 0
            ? moe_progress(pipeline_.model().take_moe_counters(), mesh_.coordinates().tp == 0,
                           options_.moe_experts, comm_)
            : "";
    say(line + moe);
    loss_sum_ = 0;
    steps_ = 0;
    loss_steps_ = 0;
    tokens_ = 0;
    interval_start_ = Clock::now();
  }

  /// Collective: the mean token loss over the validation samples --eval-windows picks
  /// (evenly spaced; all when 0), each replica evaluating a contiguous share of them in
  /// micro-batches of kEvalChunk samples through its pipeline.
  train::EvalResult validate() {
    torch::NoGradGuard no_grad;
    const std::size_t n = validation_.samples();
    const auto wanted = static_cast<std::size_t>(options_.eval_windows);
    const std::size_t count = wanted == 0 ? n : std::min(wanted, n);
    const auto [first, last] = train::eval_shard(count, mesh_.coordinates().dp, mesh_.layout().dp);
    std::vector<train::MicroBatch> micro_batches;
    double tokens = 0;
    for (std::size_t begin = first; begin < last; begin += kEvalChunk) {
      std::vector<std::size_t> indices;
      for (std::size_t j = begin; j < std::min(last, begin + kEvalChunk); ++j) {
        indices.push_back(j * n / count);
      }
      const auto [x, y] = validation_.batch(indices);
      micro_batches.push_back({x, y});
      tokens += static_cast<double>(x.numel());
    }
    const torch::Tensor mean =
        zero3_ ? zero3_evaluate(micro_batches) : pipeline_.evaluate(micro_batches);
    train::EvalSums sums;
    if (mean.defined() && holds_replica_sums()) {  // one copy of each replica's sums
      sums.loss_sum = mean.item<double>() * tokens;
      sums.count = static_cast<std::int64_t>(tokens);
    }
    return train::all_reduce_eval(comm_, sums);
  }

  /// Prints "validation step S: loss L perplexity P (N tokens)" (the final one without step).
  void report(const char* what, std::int64_t step) {
    const train::EvalResult r = validate();
    char line[200];
    const std::string at = step < 0 ? "" : " step " + std::to_string(step);
    std::snprintf(line, sizeof line, "%s%s: loss %.6f perplexity %.3f (%lld tokens)", what,
                  at.c_str(), r.mean_loss, r.perplexity, static_cast<long long>(r.count));
    say(line);
  }

  /// What a resume must match besides the model (which the checkpoint checks itself): the
  /// optimizer and everything that decides which samples each step takes. The global batch
  /// (--batch x dp), not dp: step s takes the same samples at any dp (the sampler deals the
  /// epoch's order round-robin). The tp, cp, pp and dp degrees, the micro-batches and the ZeRO
  /// stage are not recorded: a checkpoint loads at any.
  train::RunConfig run_config() const {
    train::RunConfig config = common_run_config(options_);
    config.erase("--batch");
    config["--model"] = "gpt";
    config["global batch"] = std::to_string(options_.batch * mesh_.layout().dp);
    config["training set"] = "fortunes, " + std::to_string(corpus_.train.size()) + " bytes";
    return config;
  }

  /// Collective: one checkpoint kind for every strategy (sharded_checkpoint.hpp's format in
  /// the GPT checkpoint layout): each rank saves its parameters and optimizer state (ZeRO: its
  /// shards), so a run resumes under any strategy, degrees and ZeRO stage.
  void save() {
    train::save_sharded_checkpoint(
        options_.checkpoint, train::gpt_model_description(pipeline_.model().config()), state_,
        run_state(step_, sampler_, mesh_.layout().dp, run_config()), comm_);
  }

  /// Collective. A pipeline stage or an expert rank holds part of the model: the checkpoint's
  /// other tensors are the other parts'. ZeRO's loaded shards then make the parameters.
  void restore() {
    if (!options_.resume) return;
    state_.whole_model = mesh_.layout().pp == 1 && options_.ep <= 1;
    const auto state = train::resume_sharded_checkpoint(
        options_.checkpoint, train::gpt_model_description(pipeline_.model().config()), state_,
        run_config(), comm_);
    if (state && zero_) zero_->refresh_from_shards();
    if (state && zero3_) zero3_->refresh_from_shards();
    step_ = resume_position(state, options_.checkpoint, sampler_, mesh_.layout().dp, comm_);
  }

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
  Clock::time_point interval_start_ = Clock::now();
};

}  // namespace

std::string pipeline_dry_run(const Options& options) {
  const train::PipelineOptions o = pipeline_options(options, gpt_config(options), nullptr);
  const train::ScheduleOptions& so = o.schedule;
  const std::vector<std::int64_t> blocks = train::gpt_stage_layers(gpt_config(options), o);
  const train::PipelineSchedule schedule = train::make_schedule(so);
  const train::ScheduleReport report = train::verify_schedule(schedule, o.costs);
  const std::string timeline = train::render_timeline(schedule, report);
  if (!options.timeline_svg.empty()) {  // titled by the text timeline's first line
    const std::string title = timeline.substr(0, timeline.find('\n'));
    write_file(options.timeline_svg, train::render_timeline_svg(report.timeline, title));
  }
  std::string text = timeline + "blocks per virtual stage:";
  for (std::int64_t n : blocks) text.append(" ").append(std::to_string(n));
  char line[160];
  std::snprintf(line, sizeof line,
                "\nbubble %.4f (verifier, F = B = W = 1), formula %.4f; makespan %.0f\n",
                report.bubble, train::textbook_bubble(so, o.costs), report.makespan);
  return text + line;
}

std::string write_gpt_compute_profile(const Options& options, Communicator& comm) {
  const plan::ComputeProfile profile = profile_gpt(options, gpt_config(options), comm);
  if (comm.rank() != 0) return "";
  const std::string text = plan::format_compute_profile(profile);
  write_file(options.write_compute_profile, text);
  return text;
}

void run_gpt_training(const Options& options, Communicator& comm) {
  GptTrainer trainer(options, comm);
  trainer.train();
  if (options.eval) trainer.evaluate();
}

}  // namespace chorus::train_tool
