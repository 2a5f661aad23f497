// What the GPT run prints: its description, the progress lines, the summary and the
// validation loss (evaluated through the pipeline, or unit by unit under ZeRO-3). See
// gpt_trainer_impl.hpp.
#include "gpt_trainer_impl.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace chorus::train_tool {
namespace {

constexpr std::size_t kEvalChunk = 32;  ///< validation samples per forward pass

/// "; dropout P, recompute R" when either is on, else "".
std::string dropout_text(const Options& o) {
  if (o.dropout == 0 && o.recompute == Recomputation::None) return "";
  char text[80];
  std::snprintf(text, sizeof text, "; dropout %g, recompute %s", o.dropout,
                recomputation_name(o.recompute).c_str());
  return text;
}

}  // namespace

std::string GptTrainer::describe() const {
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
std::string GptTrainer::zero_text() const {
  return options_.zero > 0 ? " (ZeRO-" + std::to_string(options_.zero) + ")" : "";
}

/// " x pp P (S, v V, L blocks per stage) in M micro-batches", or what of it applies.
std::string GptTrainer::pipeline_text() const {
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

/// Whether this rank counts its replica's tokens and validation sums: one rank of each tp × cp
/// block (each of them sees the whole batch and the same loss).
bool GptTrainer::holds_replica_sums() const {
  return mesh_.coordinates().tp == 0 && mesh_.coordinates().cp == 0;
}

/// "epoch E step S loss L tokens/s T": the mean loss of the steps since the last line over
/// every replica, and the global tokens per second.
void GptTrainer::log_progress() {
  std::array<double, 3> sums = {loss_sum_, static_cast<double>(loss_steps_),
                                static_cast<double>(tokens_)};
  comm_.all_reduce(sums.data(), sums.data(), sums.size(), DataType::Float64, ReduceOp::Sum);
  const double elapsed = std::chrono::duration<double>(GptClock::now() - interval_start_).count();
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
  interval_start_ = GptClock::now();
}

/// "summary steps=S tokens_per_s=T step_ms_median=M [unsynced_step_ms_median=U]": rank 0's
/// median step time (warm-up left out) and the global tokens/s it implies.
void GptTrainer::summarize() const {
  const StepMedians medians = step_medians(step_times_);
  if (medians.synced == 0) return;
  const double tokens = static_cast<double>(options_.batch * options_.seq_len * mesh_.layout().dp);
  char line[200];
  std::snprintf(line, sizeof line, "summary steps=%lld tokens_per_s=%.1f step_ms_median=%.2f",
                static_cast<long long>(step_), tokens / medians.synced, medians.synced * 1e3);
  say(std::string(line).append(unsynced_median_text(medians)));
}

/// ZeRO-3's validation: the mean token loss over `micro_batches`, unit by unit. Every rank runs
/// as many forward passes (the gathers are collective): a rank with fewer batches runs its
/// first (or an empty replica a one-sample batch) again and leaves it out.
torch::Tensor GptTrainer::zero3_evaluate(const std::vector<train::MicroBatch>& micro_batches) {
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

/// Collective: the mean token loss over the validation samples --eval-windows picks (evenly
/// spaced; all when 0), each replica evaluating a contiguous share of them in micro-batches of
/// kEvalChunk samples through its pipeline.
train::EvalResult GptTrainer::validate() {
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
void GptTrainer::report(const char* what, std::int64_t step) {
  const train::EvalResult r = validate();
  char line[200];
  const std::string at = step < 0 ? "" : " step " + std::to_string(step);
  std::snprintf(line, sizeof line, "%s%s: loss %.6f perplexity %.3f (%lld tokens)", what,
                at.c_str(), r.mean_loss, r.perplexity, static_cast<long long>(r.count));
  say(line);
}

}  // namespace chorus::train_tool
