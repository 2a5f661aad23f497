// The GPT run of chorus-train: its set-up per strategy, resume and checkpoints, and the entry
// points of gpt_trainer.hpp. Samples are --seq-len + 1 bytes of the fortunes corpus (see
// gpt_trainer.hpp and docs/training.md).
#include "gpt_trainer.hpp"

#include "gpt_pipeline_setup.hpp"
#include "gpt_trainer_impl.hpp"
#include "tasks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt_checkpoint.hpp>

#include <cstdio>

namespace chorus::train_tool {

GptTrainer::GptTrainer(const Options& options, Communicator& comm)
    : options_(options),
      comm_(comm),
      corpus_(train::load_fortunes(options.corpus.empty() ? train::kFortunesDir : options.corpus)),
      train_(corpus_.train, options.seq_len),
      validation_(corpus_.validation, options.seq_len),
      mesh_(make_mesh(options, comm)),
      pipeline_(gpt_config(options), pipeline_groups(mesh_, options),
                pipeline_options(options, gpt_config(options), &comm)),
      // Under ZeRO the optimizer is ZeroOptimizer's or Zero3's, over the shards.
      optimizer_(options.zero > 0 ? nullptr : make_optimizer(options, pipeline_.parameters())),
      sampler_(train_.samples(), mesh_.coordinates().dp, mesh_.layout().dp, options.seed) {
  require_argument(train_.samples() > 0 && validation_.samples() > 0,
                   "the corpus has too few bytes for --seq-len " + std::to_string(options.seq_len));
  if (options.zero == 3) {
    set_up_zero3();
  } else if (options.zero > 0) {
    set_up_zero();
  } else {
    set_up_replicated();
  }
  restore();
  if (options.zero == 0) set_up_gradient_sync();
}

void GptTrainer::set_up_zero3() {
  train::Zero3Options zero;
  zero.overlap_backward = options_.overlap;
  zero.mixed_precision = mixed_precision(options_);
  zero3_ = std::make_unique<train::Zero3>(
      pipeline_.model().parameters(), train::gpt_units(pipeline_.model()), mesh_.dp(),
      [&](std::vector<torch::Tensor> shards) {
        return make_optimizer(options_, std::move(shards));
      },
      zero);
  state_ = train::gpt_zero3_state(pipeline_.model(), *zero3_);
}

void GptTrainer::set_up_zero() {
  zero_ = std::make_unique<train::ZeroOptimizer>(
      pipeline_.parameters(), mesh_.data_context(),
      [&](std::vector<torch::Tensor> shards) {
        return make_optimizer(options_, std::move(shards));
      },
      zero_options(options_, mesh_));
  state_ = train::gpt_zero_state(pipeline_.named_parameters(), pipeline_.model().config(),
                                 mesh_.tp(), *zero_);
}

void GptTrainer::set_up_replicated() {
  state_ = train::gpt_replicated_state(pipeline_.named_parameters(), pipeline_.model().config(),
                                       mesh_.tp(), *optimizer_, mesh_.data_context());
}

void GptTrainer::set_up_gradient_sync() {
  if (options_.moe_experts > 0) {  // experts over edp, the rest over dp·cp; both over dp
    auto moe = reducer_options(options_);
    moe.divisor = mesh_.layout().dp;
    moe_reducers_ = std::make_unique<MoeGradients>(pipeline_.named_parameters(), mesh_, moe);
  } else {
    sync_ = std::make_unique<train::DataParallelSync>(
        pipeline_.parameters(), mesh_, reducer_options(options_),
        options_.no_sync || options_.alternate_sync > 0);
  }
}

/// What a resume must match besides the model (which the checkpoint checks itself): the
/// optimizer and everything that decides which samples each step takes. The global batch
/// (--batch x dp), not dp: step s takes the same samples at any dp (the sampler deals the
/// epoch's order round-robin). The tp, cp, pp and dp degrees, the micro-batches and the ZeRO
/// stage are not recorded: a checkpoint loads at any.
train::RunConfig GptTrainer::run_config() const {
  train::RunConfig config = common_run_config(options_);
  config.erase("--batch");
  config["--model"] = "gpt";
  config["global batch"] = std::to_string(options_.batch * mesh_.layout().dp);
  config["training set"] = "fortunes, " + std::to_string(corpus_.train.size()) + " bytes";
  return config;
}

/// Collective: one checkpoint kind for every strategy (sharded_checkpoint.hpp's format in the
/// GPT checkpoint layout): each rank saves its parameters and optimizer state (ZeRO: its
/// shards), so a run resumes under any strategy, degrees and ZeRO stage.
void GptTrainer::save() {
  train::save_sharded_checkpoint(
      options_.checkpoint, train::gpt_model_description(pipeline_.model().config()), state_,
      run_state(step_, sampler_, mesh_.layout().dp, run_config()), comm_);
}

/// Collective. A pipeline stage or an expert rank holds part of the model: the checkpoint's
/// other tensors are the other parts'. ZeRO's loaded shards then make the parameters.
void GptTrainer::restore() {
  if (!options_.resume) return;
  state_.whole_model = mesh_.layout().pp == 1 && options_.ep <= 1;
  const auto state = train::resume_sharded_checkpoint(
      options_.checkpoint, train::gpt_model_description(pipeline_.model().config()), state_,
      run_config(), comm_);
  if (state && zero_) zero_->refresh_from_shards();
  if (state && zero3_) zero3_->refresh_from_shards();
  step_ = resume_position(state, options_.checkpoint, sampler_, mesh_.layout().dp, comm_);
}

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
