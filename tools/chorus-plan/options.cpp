// Parser of chorus-plan's command line (options.hpp).
#include "options.hpp"

#include <chorus/error.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>

namespace chorus::plan_tool {
namespace {

Error bad(const std::string& option, const std::string& value, const std::string& why) {
  return Error(Status::InvalidArgument, option + " '" + value + "' is not valid: " + why);
}

std::int64_t to_int(const std::string& option, const std::string& value, std::int64_t min,
                    std::int64_t max) {
  std::size_t used = 0;
  std::int64_t number = 0;
  try {
    number = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || number < min || number > max) {
    throw bad(option, value,
              "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return number;
}

double to_positive(const std::string& option, const std::string& value) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(number) || number <= 0) {
    throw bad(option, value, "must be a number > 0");
  }
  return number;
}

/// What the files and rate options say, applied in a fixed order after parsing.
struct Sources {
  std::string machine, tuning, compute;
  std::optional<double> tflops, efficiency, memory_gib;
  std::optional<std::string> precision;
};

using Setter = std::function<void(Options&, Sources&, const std::string&)>;

Setter integer(std::int64_t plan::ModelConfig::*field, const char* name, std::int64_t min,
               std::int64_t max) {
  return [=](Options& o, Sources&, const std::string& v) {
    o.request.model.*field = to_int(name, v, min, max);
  };
}

const std::map<std::string, Setter>& setters() {
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  static const std::map<std::string, Setter> map = {
      {"--layers", integer(&plan::ModelConfig::layers, "--layers", 1, 100000)},
      {"--hidden", integer(&plan::ModelConfig::hidden, "--hidden", 1, 1 << 24)},
      {"--heads", integer(&plan::ModelConfig::heads, "--heads", 1, 1 << 20)},
      {"--vocab", integer(&plan::ModelConfig::vocab, "--vocab", 1, 1 << 30)},
      {"--seq-len", integer(&plan::ModelConfig::seq, "--seq-len", 1, 1 << 30)},
      {"--ffn", integer(&plan::ModelConfig::ffn, "--ffn", 1, 1 << 28)},
      {"--experts", integer(&plan::ModelConfig::experts, "--experts", 1, 1 << 20)},
      {"--top-k", integer(&plan::ModelConfig::top_k, "--top-k", 1, 2)},
      {"--global-batch",
       [](Options& o, Sources&, const std::string& v) {
         o.request.global_batch = to_int("--global-batch", v, 1, kBig);
       }},
      {"--micro-batch",
       [](Options& o, Sources&, const std::string& v) {
         o.request.micro_batch = to_int("--micro-batch", v, 1, kBig);
       }},
      {"--ranks-per-host",
       [](Options& o, Sources&, const std::string& v) {
         o.request.ranks_per_host = static_cast<int>(to_int("--ranks-per-host", v, 1, 1 << 16));
       }},
      {"--hosts",
       [](Options& o, Sources&, const std::string& v) {
         o.request.hosts = static_cast<int>(to_int("--hosts", v, 1, 1 << 20));
       }},
      {"--memory-gib", [](Options&, Sources& s,
                          const std::string& v) { s.memory_gib = to_positive("--memory-gib", v); }},
      {"--machine", [](Options&, Sources& s, const std::string& v) { s.machine = v; }},
      {"--tuning", [](Options&, Sources& s, const std::string& v) { s.tuning = v; }},
      {"--compute-profile", [](Options&, Sources& s, const std::string& v) { s.compute = v; }},
      {"--tflops",
       [](Options&, Sources& s, const std::string& v) { s.tflops = to_positive("--tflops", v); }},
      {"--efficiency",
       [](Options&, Sources& s, const std::string& v) {
         s.efficiency = to_positive("--efficiency", v);
         if (*s.efficiency > 1) throw bad("--efficiency", v, "must be at most 1");
       }},
      {"--precision",
       [](Options&, Sources& s, const std::string& v) {
         if (v != "fp32" && v != "bf16") throw bad("--precision", v, "expected fp32|bf16");
         s.precision = v;
       }},
      {"--top",
       [](Options& o, Sources&, const std::string& v) {
         o.top = static_cast<std::size_t>(to_int("--top", v, 0, kBig));
         o.top_given = true;
       }},
  };
  return map;
}

bool set_flag(Options& o, const std::string& word) {
  if (word == "-h" || word == "--help") return o.help = true;
  if (word == "--json") return o.json = true;
  if (word == "--explain") return o.explain = true;
  if (word == "--dropout") return o.request.model.dropout = true;
  return false;
}

/// The machine: its profile, then the tuning file, the compute profile and the options.
void build_machine(Options& o, const Sources& s) {
  plan::Machine& machine = o.request.machine;
  if (!s.machine.empty()) machine = plan::load_machine_profile(s.machine);
  if (!s.tuning.empty()) plan::load_tuning(machine, s.tuning);
  if (s.precision) {
    machine.precision = *s.precision == "bf16" ? plan::Precision::bf16() : plan::Precision::fp32();
  }
  if (s.tflops) machine.peak_flops = *s.tflops * 1e12;
  if (s.efficiency) machine.efficiency = *s.efficiency;
  if (!s.compute.empty()) plan::load_compute_profile(machine, s.compute);
  if (s.memory_gib) o.request.memory_budget = *s.memory_gib * 1024.0 * 1024 * 1024;
}

}  // namespace

Options parse_options(int argc, const char* const argv[]) {
  Options o;
  Sources sources;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (set_flag(o, word)) continue;
    auto it = setters().find(word);
    if (it == setters().end()) throw bad("option", word, "unknown (see --help)");
    if (i + 1 >= argc) throw bad(word, "", "the option needs a value");
    it->second(o, sources, argv[++i]);
  }
  if (o.help) return o;
  build_machine(o, sources);
  if (o.request.model.experts == 0 && o.request.model.top_k != 1) {
    throw bad("--top-k", std::to_string(o.request.model.top_k), "needs --experts");
  }
  return o;
}

std::string usage_text() {
  return R"(usage: chorus-plan [options]
Predicts the step time and memory per rank of every layout (tp, pp, cp, ep, dp, sequence
parallelism, ZeRO stage, recomputation, pipeline schedule, micro-batches) of a GPT over a
world, best first, each with the chorus-train command line that runs it (docs/planner.md).
Model:
  --layers L --hidden H --heads A --vocab V --seq-len S      [2, 64, 4, 256, 64]
  --ffn F                MLP (and expert) inner size                         [4H]
  --experts E --top-k K  mixture of experts in every block, K in 1..2     [dense]
  --dropout              dropout on (its masks kept for backward)
Batch and world:
  --global-batch B       samples per optimizer step over all replicas          [8]
  --micro-batch b        samples per micro-batch                        [searched]
  --ranks-per-host R --hosts N                                            [1, 1]
  --memory-gib G         memory budget per rank      [the machine's; else none]
Machine (docs/planner.md, "Machine profiles"):
  --machine FILE         machine profile: peak_tflops, efficiency, memory_gib,
                         memory_gb_per_s, precision and the links (shm.* inside a
                         host, tcp.* between)
  --tuning FILE          links from a tuning file (chorus-perf --tune, CHORUS_TUNING_FILE)
  --compute-profile FILE measured block, head, embedding and optimizer times at
                         one or more micro-batch sizes (chorus-train
                         --write-compute-profile), fitted as fixed + per-FLOP time;
                         take it with as many processes computing at once as the
                         plan's ranks per host (ranks sharing a host's cores slow
                         each other): a warning on stderr when they differ
  --tflops X --efficiency E --precision fp32|bf16      override the profile's
Output:
  --top N                layouts printed (0: all)  [all, or the best 20 when more]
  --explain              why the best layout beats the runner-up
  --json                 the plan as JSON
)";
}

}  // namespace chorus::plan_tool
