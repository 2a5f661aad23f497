// The refusals of chorus-train's options: what a run does not combine, each a sentence naming
// the option and its value (see option_checks.hpp).
#include "option_checks.hpp"

#include <sstream>
#include <string>

namespace chorus::train_tool {

Error bad(const std::string& option, const std::string& value, const std::string& why) {
  return Error(Status::InvalidArgument, option + " '" + value + "' is not valid: " + why);
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

namespace {

/// Refuses --ep and the routing options without --moe-experts, E not a multiple of --ep or
/// below --moe-top-k, and routing groups that would span cp ranks.
void check_moe_options(const Options& o) {
  if (o.moe_experts == 0) {
    if (o.ep != 1) throw bad("--ep", std::to_string(o.ep), "needs --moe-experts");
    if (o.moe_top_k != 1)
      throw bad("--moe-top-k", std::to_string(o.moe_top_k), "needs --moe-experts");
    return;
  }
  if (o.moe_experts % o.ep != 0)
    throw bad("--moe-experts", std::to_string(o.moe_experts),
              "is not a multiple of --ep " + std::to_string(o.ep));
  if (o.moe_top_k > o.moe_experts)
    throw bad("--moe-top-k", std::to_string(o.moe_top_k),
              "exceeds --moe-experts " + std::to_string(o.moe_experts));
  const std::int64_t rows = o.seq_len / o.cp;  // a sample's tokens on one cp rank
  const bool groups_fit = o.moe_group_tokens > 0 && rows % o.moe_group_tokens == 0;
  if (o.cp > 1 && o.seq_len % o.cp == 0 && !groups_fit)
    throw bad("--moe-group-tokens", std::to_string(o.moe_group_tokens),
              "must divide the " + std::to_string(rows) + " tokens of a sample each of --cp " +
                  std::to_string(o.cp) + " ranks holds (a routing group stays on one rank)");
  if (o.no_sync)
    throw bad("--moe-experts", std::to_string(o.moe_experts), "cannot be combined with --no-sync");
  if (o.alternate_sync > 0)
    throw bad("--moe-experts", std::to_string(o.moe_experts),
              "cannot be combined with --alternate-sync");
}

/// Refuses what ZeRO-3 does not run: the LSTM (one layer holds its parameters) and, for the
/// GPT, any model parallelism or accumulation (it shards over plain data parallelism).
void check_zero3_options(const Options& o) {
  if (o.zero != 3) return;
  if (o.model == ModelKind::Lstm) {
    throw bad("--zero", "3", "needs --model mlp or gpt (the LSTM's layers are not units)");
  }
  if (o.tp > 1) throw bad("--zero", "3", "cannot be combined with --tp " + std::to_string(o.tp));
  if (o.cp > 1) throw bad("--zero", "3", "cannot be combined with --cp " + std::to_string(o.cp));
  if (o.micro_batches > 1) {
    throw bad("--zero", "3",
              "cannot be combined with --micro-batches " + std::to_string(o.micro_batches));
  }
  if (o.dropout != 0) {
    throw bad("--zero", "3", "cannot be combined with --dropout " + number_text(o.dropout));
  }
  if (o.moe_experts > 0) {
    throw bad("--zero", "3",
              "cannot be combined with --moe-experts (experts are reduced over their own group)");
  }
}

}  // namespace

/// Refuses --compute-profile without --partition time, and synthetic compute with what it
/// does not reproduce (sequence parallelism, cp, experts, ZeRO-3). A list's counts are checked
/// against the blocks and stages when the pipeline is built.
void check_pipeline_tool_options(const Options& o) {
  if (!o.compute_profile.empty() && o.partition != "time")
    throw bad("--compute-profile", o.compute_profile, "needs --partition time");
  if (o.synthetic_compute == 0) return;
  const std::string ms = number_text(o.synthetic_compute);
  if (o.sequence_parallel)
    throw bad("--synthetic-compute", ms, "cannot be combined with --sequence-parallel");
  if (o.cp > 1) throw bad("--synthetic-compute", ms, "cannot be combined with --cp");
  if (o.moe_experts > 0)
    throw bad("--synthetic-compute", ms, "cannot be combined with --moe-experts");
  if (o.zero == 3) throw bad("--synthetic-compute", ms, "cannot be combined with --zero 3");
}

/// Refuses the GPT's options with another model, and what the GPT run does not support.
void check_gpt_options(const Options& o) {
  if (o.model != ModelKind::Gpt) {
    if (o.tp != 1) throw bad("--tp", std::to_string(o.tp), "needs --model gpt");
    if (o.cp != 1) throw bad("--cp", std::to_string(o.cp), "needs --model gpt");
    if (o.sequence_parallel) throw bad("--sequence-parallel", "", "needs --model gpt");
    if (o.dropout != 0) throw bad("--dropout", number_text(o.dropout), "needs --model gpt");
    if (o.recompute != Recomputation::None)
      throw bad("--recompute", recomputation_name(o.recompute), "needs --model gpt");
    if (o.pp != 1) throw bad("--pp", std::to_string(o.pp), "needs --model gpt");
    if (o.micro_batches != 1) {
      throw bad("--micro-batches", std::to_string(o.micro_batches), "needs --model gpt");
    }
    if (o.pp_dry_run) throw bad("--pp-dry-run", "", "needs --model gpt");
    if (o.partition != "params") throw bad("--partition", o.partition, "needs --model gpt");
    if (o.synthetic_compute > 0)
      throw bad("--synthetic-compute", number_text(o.synthetic_compute), "needs --model gpt");
    if (!o.timeline_svg.empty()) throw bad("--timeline-svg", o.timeline_svg, "needs --model gpt");
    if (o.peak_memory) throw bad("--peak-memory", "", "needs --model gpt");
    if (!o.write_compute_profile.empty())
      throw bad("--write-compute-profile", o.write_compute_profile, "needs --model gpt");
    if (o.moe_experts != 0)
      throw bad("--moe-experts", std::to_string(o.moe_experts), "needs --model gpt");
    return;
  }
  check_moe_options(o);
  if (o.batch % o.micro_batches != 0) {
    throw bad("--micro-batches", std::to_string(o.micro_batches),
              "--batch " + std::to_string(o.batch) + " does not split into " +
                  std::to_string(o.micro_batches) + " micro-batches");
  }
  const bool interleaved = o.schedule == "interleaved";
  if (!interleaved && o.virtual_stages > 1) {
    throw bad("--virtual-stages", std::to_string(o.virtual_stages),
              "needs --schedule interleaved (--schedule " + o.schedule + " runs 1 per rank)");
  }
}

/// Refuses --mixed-precision without ZeRO (the fp32 masters are ZeRO's shards), with the LSTM
/// (which computes in fp32), fp16 with the GPT (torch 1.13 cannot run its layers in fp16) and
/// with pipelines.
void check_mixed_precision(const Options& o) {
  if (o.mixed_precision == Precision::Fp32) return;
  const std::string type = o.mixed_precision == Precision::Bf16 ? "bf16" : "fp16";
  if (o.zero == 0) {
    throw bad("--mixed-precision", type, "needs --zero 1|2|3 (the fp32 masters are its shards)");
  }
  if (o.model == ModelKind::Lstm) {
    throw bad("--mixed-precision", type, "needs --model mlp or gpt (the LSTM computes in fp32)");
  }
  if (o.model == ModelKind::Gpt && o.mixed_precision == Precision::Fp16) {
    throw bad("--mixed-precision", type,
              "needs bf16 with --model gpt (torch 1.13 has no fp16 matrix product, LayerNorm or "
              "softmax on CPU)");
  }
  if (o.pp > 1) {
    throw bad("--mixed-precision", type,
              "cannot be combined with --pp " + std::to_string(o.pp) +
                  " (the pipeline's messages are in the model's fp32)");
  }
}

/// Refuses what ZeRO does not combine with.
void check_zero_options(const Options& o) {
  if (o.zero == 0) return;
  const std::string stage = std::to_string(o.zero);
  if (o.zero >= 2 && o.pp > 1) {
    throw bad("--zero", stage,
              "cannot be combined with --pp " + std::to_string(o.pp) +
                  " (the pipeline accumulates each stage's gradients over its micro-batches, "
                  "which ZeRO-2 and ZeRO-3 keep only as shards)");
  }
  check_zero3_options(o);
  if (o.zero < 3 && o.moe_experts > 0) {  // two reducers (experts over edp) and one norm
    throw bad("--zero", stage,
              "cannot be combined with --moe-experts (experts are reduced over their own group)");
  }
  if (o.no_sync) throw bad("--zero", stage, "cannot be combined with --no-sync");
  if (o.alternate_sync > 0) throw bad("--zero", stage, "cannot be combined with --alternate-sync");
  if (o.compression != Compression::None) {
    throw bad("--zero", stage, "cannot be combined with --compression (shards travel as fp32)");
  }
}

}  // namespace chorus::train_tool
