// Parser of chorus-train's command line (see options.hpp).
#include "options.hpp"

#include "option_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/pipeline_schedule.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace chorus::train_tool {
namespace {

constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();

std::string range_text(std::int64_t min, std::int64_t max) {
  if (max == kNoLimit) return "must be an integer >= " + std::to_string(min);
  return "must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::int64_t to_int(const std::string& option, const std::string& value, std::int64_t min,
                    std::int64_t max = kNoLimit) {
  std::size_t used = 0;
  std::int64_t number = 0;
  try {
    number = std::stoll(value, &used);
  } catch (const std::exception&) {
    throw bad(option, value, range_text(min, max));
  }
  if (used != value.size() || number < min || number > max) {
    throw bad(option, value, range_text(min, max));
  }
  return number;
}

/// A finite number in [min, max] (min itself excluded when `min_excluded`).
double to_double(const std::string& option, const std::string& value, double min, bool min_excluded,
                 double max, const std::string& range) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    throw bad(option, value, range);
  }
  const bool above_min = min_excluded ? number > min : number >= min;
  if (used != value.size() || !std::isfinite(number) || !above_min || number > max) {
    throw bad(option, value, range);
  }
  return number;
}

/// Options as given; the defaults that depend on other options are resolved in finish().
struct Parsed {
  Options options;
  std::optional<std::int64_t> hidden;
  std::optional<int> layers;
  std::optional<std::int64_t> batch;
  std::optional<OptimizerKind> optimizer;
  std::optional<double> lr;
};

using Setter = std::function<void(Parsed&, const std::string&)>;

/// --name value -> the Options field it sets (integers within [min, max]).
Setter integer(std::int64_t Options::*field, const char* name, std::int64_t min,
               std::int64_t max = kNoLimit) {
  return [=](Parsed& p, const std::string& v) { p.options.*field = to_int(name, v, min, max); };
}

Setter small_integer(int Options::*field, const char* name, int min, int max) {
  return [=](Parsed& p, const std::string& v) {
    p.options.*field = static_cast<int>(to_int(name, v, min, max));
  };
}

Setter choice(const char* name, const std::map<std::string, std::function<void(Parsed&)>>& map) {
  return [=](Parsed& p, const std::string& v) {
    auto it = map.find(v);
    if (it == map.end()) {
      std::string names;
      for (const auto& entry : map) names += (names.empty() ? "" : "|") + entry.first;
      throw bad(name, v, "expected " + names);
    }
    it->second(p);
  };
}

Setter path_option(std::string Options::*field, const char* name) {
  return [=](Parsed& p, const std::string& v) {
    if (v.empty()) throw bad(name, v, "expected a file path");
    p.options.*field = v;
  };
}

/// --partition params|time|L1,L2,...
void set_partition(Options& o, const std::string& v) {
  o.partition_layers.clear();
  if (v == "params" || v == "time") {
    o.partition = v;
    return;
  }
  std::istringstream items(v);
  for (std::string item; std::getline(items, item, ',');) {
    try {
      o.partition_layers.push_back(to_int("--partition", item, 1, 64));
    } catch (const Error&) {
      throw bad("--partition", v, "expected params, time or blocks per stage (3,2,3)");
    }
  }
  if (o.partition_layers.empty() || v.back() == ',') {
    throw bad("--partition", v, "expected params, time or blocks per stage (3,2,3)");
  }
  o.partition = "list";
}

const std::map<std::string, Setter>& valued_options() {
  static const std::map<std::string, Setter> setters = {
      {"--model",
       choice("--model", {{"mlp", [](Parsed& p) { p.options.model = ModelKind::Mlp; }},
                          {"lstm", [](Parsed& p) { p.options.model = ModelKind::Lstm; }},
                          {"gpt", [](Parsed& p) { p.options.model = ModelKind::Gpt; }}})},
      {"--optimizer",
       choice("--optimizer", {{"sgd", [](Parsed& p) { p.optimizer = OptimizerKind::Sgd; }},
                              {"adam", [](Parsed& p) { p.optimizer = OptimizerKind::Adam; }}})},
      {"--compression",
       choice("--compression",
              {{"none", [](Parsed& p) { p.options.compression = Compression::None; }},
               {"fp16", [](Parsed& p) { p.options.compression = Compression::Fp16; }},
               {"bf16", [](Parsed& p) { p.options.compression = Compression::Bf16; }}})},
      {"--mixed-precision",
       choice("--mixed-precision",
              {{"bf16", [](Parsed& p) { p.options.mixed_precision = Precision::Bf16; }},
               {"fp16", [](Parsed& p) { p.options.mixed_precision = Precision::Fp16; }}})},
      {"--epochs", small_integer(&Options::epochs, "--epochs", 1, 1000000)},
      {"--batch",
       [](Parsed& p, const std::string& v) { p.batch = to_int("--batch", v, 1, 1 << 20); }},
      {"--steps", integer(&Options::steps, "--steps", 0)},
      {"--checkpoint-every", integer(&Options::checkpoint_every, "--checkpoint-every", 0)},
      {"--alternate-sync", integer(&Options::alternate_sync, "--alternate-sync", 1)},
      {"--log-every", integer(&Options::log_every, "--log-every", 1)},
      {"--threads", small_integer(&Options::threads, "--threads", 1, 256)},
      {"--layers",
       [](Parsed& p, const std::string& v) {
         p.layers = static_cast<int>(to_int("--layers", v, 1, 64));
       }},
      {"--tp", small_integer(&Options::tp, "--tp", 1, 4096)},
      {"--cp", small_integer(&Options::cp, "--cp", 1, 4096)},
      {"--zero", small_integer(&Options::zero, "--zero", 1, 3)},
      {"--pp", small_integer(&Options::pp, "--pp", 1, 4096)},
      {"--dp", small_integer(&Options::dp, "--dp", 1, 1 << 20)},
      {"--virtual-stages", small_integer(&Options::virtual_stages, "--virtual-stages", 1, 64)},
      {"--micro-batches", small_integer(&Options::micro_batches, "--micro-batches", 1, 1 << 20)},
      {"--schedule",
       [](Parsed& p, const std::string& v) {
         try {
           (void)train::schedule_kind(v);
         } catch (const Error&) {
           throw bad("--schedule", v, "expected gpipe|1f1b|interleaved|zb-h1");
         }
         p.options.schedule = v;
       }},
      {"--heads", integer(&Options::heads, "--heads", 1, 4096)},
      {"--seq-len", integer(&Options::seq_len, "--seq-len", 2, 1 << 16)},
      {"--eval-every", integer(&Options::eval_every, "--eval-every", 0)},
      {"--eval-windows", integer(&Options::eval_windows, "--eval-windows", 0)},
      {"--dropout",
       [](Parsed& p, const std::string& v) {
         p.options.dropout = to_double("--dropout", v, 0, false, std::nextafter(1.0, 0.0),
                                       "must be a number from 0 to below 1");
       }},
      {"--recompute",
       choice("--recompute",
              {{"none", [](Parsed& p) { p.options.recompute = Recomputation::None; }},
               {"selective", [](Parsed& p) { p.options.recompute = Recomputation::Selective; }},
               {"full", [](Parsed& p) { p.options.recompute = Recomputation::Full; }}})},
      {"--moe-experts", integer(&Options::moe_experts, "--moe-experts", 1, 1 << 20)},
      {"--moe-top-k", small_integer(&Options::moe_top_k, "--moe-top-k", 1, 2)},
      {"--moe-every", integer(&Options::moe_every, "--moe-every", 1, 64)},
      {"--moe-group-tokens", integer(&Options::moe_group_tokens, "--moe-group-tokens", 0)},
      {"--ep", small_integer(&Options::ep, "--ep", 1, 4096)},
      {"--moe-capacity",
       [](Parsed& p, const std::string& v) {
         p.options.moe_dropless = v == "dropless";
         if (!p.options.moe_dropless)
           p.options.moe_capacity =
               to_double("--moe-capacity", v, 0, true, std::numeric_limits<double>::max(),
                         "must be a capacity factor > 0 or dropless");
       }},
      {"--moe-aux-loss",
       [](Parsed& p, const std::string& v) {
         p.options.moe_aux_loss = to_double("--moe-aux-loss", v, 0, false,
                                            std::numeric_limits<double>::max(),
                                            "must be a number >= 0");
       }},
      {"--moe-z-loss",
       [](Parsed& p, const std::string& v) {
         p.options.moe_z_loss = to_double("--moe-z-loss", v, 0, false,
                                          std::numeric_limits<double>::max(),
                                          "must be a number >= 0");
       }},
      {"--corpus",
       [](Parsed& p, const std::string& v) {
         if (v.empty()) throw bad("--corpus", v, "expected a directory");
         p.options.corpus = v;
       }},
      {"--hidden",
       [](Parsed& p, const std::string& v) { p.hidden = to_int("--hidden", v, 1, 65536); }},
      {"--seed",
       [](Parsed& p, const std::string& v) {
         p.options.seed = static_cast<std::uint64_t>(to_int("--seed", v, 0));
       }},
      {"--lr",
       [](Parsed& p, const std::string& v) {
         p.lr = to_double("--lr", v, 0, true, std::numeric_limits<double>::max(),
                          "must be a number > 0 (leave --lr out for the optimizer's default)");
       }},
      {"--bucket-cap-mb",
       [](Parsed& p, const std::string& v) {
         p.options.bucket_cap_mb =
             to_double("--bucket-cap-mb", v, kMinBucketCapMb, false, kMaxBucketCapMb,
                       "must be a number from " + number_text(kMinBucketCapMb) + " to " +
                           number_text(kMaxBucketCapMb) + " (MiB)");
       }},
      {"--partition", [](Parsed& p, const std::string& v) { set_partition(p.options, v); }},
      {"--compute-profile", path_option(&Options::compute_profile, "--compute-profile")},
      {"--write-compute-profile",
       path_option(&Options::write_compute_profile, "--write-compute-profile")},
      {"--timeline-svg", path_option(&Options::timeline_svg, "--timeline-svg")},
      {"--synthetic-compute",
       [](Parsed& p, const std::string& v) {
         p.options.synthetic_compute =
             to_double("--synthetic-compute", v, 0, true, 1e6, "must be milliseconds > 0");
       }},
      {"--checkpoint",
       [](Parsed& p, const std::string& v) {
         if (v.empty()) throw bad("--checkpoint", v, "expected a file path");
         p.options.checkpoint = v;
       }},
  };
  return setters;
}

/// Whether `word` is a flag; sets it.
bool set_flag(Options& o, const std::string& word) {
  static const std::map<std::string, std::function<void(Options&)>> flags = {
      {"-h", [](Options& x) { x.help = true; }},
      {"--help", [](Options& x) { x.help = true; }},
      {"--no-sync", [](Options& x) { x.no_sync = true; }},
      {"--no-shared-buckets", [](Options& x) { x.shared_buckets = false; }},
      {"--no-overlap", [](Options& x) { x.overlap = false; }},
      {"--resume", [](Options& x) { x.resume = true; }},
      {"--no-eval", [](Options& x) { x.eval = false; }},
      {"--sequence-parallel", [](Options& x) { x.sequence_parallel = true; }},
      {"--pp-dry-run", [](Options& x) { x.pp_dry_run = true; }},
      {"--peak-memory", [](Options& x) { x.peak_memory = true; }},
  };
  auto it = flags.find(word);
  if (it == flags.end()) return false;
  it->second(o);
  return true;
}

/// Resolves the defaults that depend on other options and refuses combinations.
Options finish(Parsed parsed) {
  Options o = parsed.options;
  const bool mlp = o.model == ModelKind::Mlp;
  const bool gpt = o.model == ModelKind::Gpt;
  o.hidden = parsed.hidden.value_or(mlp ? 1024 : gpt ? 64 : 256);
  o.layers = parsed.layers.value_or(gpt ? 2 : 3);
  o.batch = parsed.batch.value_or(gpt ? 8 : 64);
  o.optimizer = parsed.optimizer.value_or(mlp ? OptimizerKind::Sgd : OptimizerKind::Adam);
  check_gpt_options(o);
  check_zero_options(o);
  check_mixed_precision(o);
  if (o.virtual_stages == 0) o.virtual_stages = o.schedule == "interleaved" ? 2 : 1;
  check_pipeline_tool_options(o);
  o.lr = parsed.lr.value_or(o.optimizer == OptimizerKind::Sgd ? 0.05 : 0.003);
  if (o.alternate_sync > 0 && o.no_sync) {
    throw bad("--alternate-sync", std::to_string(o.alternate_sync),
              "cannot be combined with --no-sync");
  }
  if (o.resume && o.checkpoint.empty()) throw bad("--resume", "", "needs --checkpoint path");
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) {
    throw bad("--checkpoint-every", std::to_string(o.checkpoint_every), "needs --checkpoint path");
  }
  return o;
}

}  // namespace

Options parse_options(int argc, const char* const argv[]) {
  Parsed parsed;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    std::string value;
    const bool has_inline = word.rfind("--", 0) == 0 && word.find('=') != std::string::npos;
    if (has_inline) {
      value = word.substr(word.find('=') + 1);
      word = word.substr(0, word.find('='));
    }
    if (set_flag(parsed.options, word)) {
      if (has_inline) throw bad(word, value, "the option takes no value");
      continue;
    }
    auto it = valued_options().find(word);
    if (it == valued_options().end()) throw bad("option", word, "unknown (see --help)");
    if (!has_inline) {
      if (i + 1 >= argc) throw bad(word, "", "the option needs a value");
      value = argv[++i];
    }
    it->second(parsed, value);
  }
  return finish(parsed);
}

std::string optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::Sgd ? "sgd" : "adam";
}

std::string recomputation_name(Recomputation kind) {
  return kind == Recomputation::Full        ? "full"
         : kind == Recomputation::Selective ? "selective"
                                            : "none";
}

std::string usage_text() {
  return R"(usage: chorusrun -n N chorus-train [options]
Trains a model with Chorus DDP on N ranks (also runs alone as one rank).
  --model mlp|lstm|gpt   mlp: Fashion-MNIST classifier 784-H-..-H-10 (--hidden, --layers);
                         lstm: character-level LSTM on /usr/share/common-licenses;
                         gpt: byte-level GPT on the fortunes corpus, split over --tp
                         ranks, its sequences over --cp ranks and its blocks over --pp
                         stages, data parallel over N / (tp x cp x pp) replicas   [mlp]
  --epochs E             passes over the training set, 1..1000000               [1]
  --batch B              samples per (data-parallel) replica per step, 1..1048576
                                                                       [64; gpt: 8]
  --steps S              stop after S steps in total (0 = no limit)             [0]
  --optimizer sgd|adam   sgd: SGD with momentum 0.9; adam: Adam [mlp: sgd, lstm/gpt: adam]
  --lr X                 learning rate, > 0                      [sgd: 0.05, adam: 0.003]
  --no-sync              same compute without gradient synchronisation (benchmark;
                         gpt: none over dp, the sum over cp stays)
  --alternate-sync K     blocks of K synchronised and K unsynchronised steps take turns
                         in the same processes; the summary gives both step medians
                         (benchmark: the replicas drift apart)
  --zero 1|2|3           ZeRO instead of DDP: the optimizer state (1), and the
                         gradients (2), and the parameters (3) sharded over the ranks;
                         1-2: parameters all-gathered after each step (gpt: sharded over
                         dp x cp, with --tp, --sequence-parallel and --cp, 1 also with
                         --pp; not with --moe-experts);
                         3: each layer (gpt: each block) gathered around its forward and
                         backward (mlp and gpt, data parallelism alone); not with --no-sync,
                         --alternate-sync or --compression; 3 not with --moe-experts
  --mixed-precision T    with --zero: bf16|fp16 copies of the parameters compute, and the
                         gradients and parameters travel, in T; the optimizer steps fp32
                         master shards (mlp: fp16 computes through fp32 copies; gpt: bf16
                         only, its loss in fp32)
  --no-shared-buckets    gradient buckets in ordinary memory, not host-shared (benchmark)
  --no-overlap           all-reduce every bucket after backward, none from the gradient
                         hooks (DdpOptions::overlap_backward = false)
  --checkpoint PATH      save model, optimizer, step, sampler state and the run's
                         configuration at the end, each rank its shards; rank 0 checks
                         that it can write PATH before the first step (loads with or
                         without --zero at any rank count of the same global batch; gpt:
                         at any --tp, --cp, --pp, dp and --zero 0-3)
  --checkpoint-every N   ... and every N steps (needs --checkpoint)
  --resume               continue from --checkpoint PATH when it exists (else say so and
                         start from scratch); refused, before any step, when the checkpoint
                         was made with another --model, --hidden, --layers, --optimizer,
                         --lr, --seed, global batch (--batch x ranks) or training set
                         (gpt: the global batch (--batch x dp), the model's --layers,
                         --hidden, --heads and --seq-len, not tp, cp, pp or dp)
  --seed S               initial weights and data order, >= 0                   [1]
  --bucket-cap-mb M      DDP gradient bucket cap in MiB, 0.001..65536           [25]
  --compression C        gradients on the wire: none|fp16|bf16                  [none]
  --threads T            torch threads per rank, 1..256                         [1]
  --log-every N          progress line every N steps, >= 1                      [50]
  --hidden H             MLP width / LSTM state size / GPT width, 1..65536
                                                                  [1024 / 256 / 64]
  --layers L             MLP hidden layers / GPT blocks, 1..64         [3; gpt: 2]
  --no-eval              skip the final test-set evaluation
GPT (--model gpt; the options above apply to its data-parallel dimension):
  --tp T                 tensor-parallel degree, 1..4096                          [1]
  --cp U                 context-parallel (Ulysses) degree: each of U ranks holds
                         S/U tokens of every sample, 1..4096                     [1]
  --pp P                 pipeline stages, 1..4096; the blocks are cut into P·V stages
                         (--partition)                                           [1]
  --dp D                 data-parallel degree: N / (T·U·P), an error if given and
                         different                                     [N / (T·U·P)]
  --schedule S           gpipe|1f1b|interleaved|zb-h1 (docs/training.md)       [1f1b]
  --virtual-stages V     chunks per pipeline rank, interleaved only, >= 2
                                                          [interleaved: 2, else 1]
  --micro-batches M      --batch splits into M micro-batches (B % M == 0); the
                         interleaved schedule needs M >= P                       [1]
  --pp-dry-run           print the schedule's timeline and its bubble against the
                         formula, then exit without training (needs no launcher)
  --partition K          blocks per stage: params (balanced by parameter count),
                         time (by each block's measured time: a short profiling run
                         on rank 0, or --compute-profile FILE's layer lines), or a
                         list of P·V counts, 3,2,3                          [params]
  --compute-profile FILE per-block times for --partition time (docs/planner.md)
  --write-compute-profile FILE
                         time every block's forward and backward (and the
                         embedding's and the head's) at tp 1 and --batch /
                         --micro-batches samples and every power of two below (and
                         the backward under recomputation), and the optimizer's step;
                         write the compute profile chorus-plan reads
                         (docs/planner.md), and exit. Under chorusrun -n R every
                         rank times its own copy at once (ranks sharing a host's
                         cores slow each other): rank 0 writes the slowest rank's
                         times, concurrency R. Take it with the plan's ranks per host
  --timeline-svg FILE    with --pp-dry-run the verifier's schedule, else the last
                         step's recorded computations, as an SVG timeline
  --synthetic-compute MS each computation sleeps its cost instead of computing:
                         MS milliseconds per block forward at micro-batch 1 and
                         tp 1, scaled by the planner's FLOP count (docs/training.md);
                         the messages, tp all-reduces and gradient reductions stay
                         real (on zeros; the loss reads 0); not with
                         --sequence-parallel, --cp, --moe-experts or --zero 3
  --peak-memory          count the bytes torch holds (a counting CPU allocator) and
                         print "memory peak_bytes=P": the most, over the ranks, that
                         training held beyond what the rank held before its first step,
                         plus its parameters and gradient buckets (host-shared ones
                         too): what chorus-plan predicts per rank
  --sequence-parallel    Megatron sequence parallelism on the tp group
  --heads A              attention heads, a multiple of T·U, dividing --hidden   [4]
  --seq-len S            tokens per sample, 2..65536, a multiple of U (with
                         --sequence-parallel of T·U)                             [64]
  --corpus DIR           the fortune files            [/usr/share/games/fortunes]
  --eval-every N         validation loss every N steps (0: only the final one)   [50]
  --eval-windows W       validation samples each evaluation uses, evenly spaced
                         over the validation split (0: all of them)             [256]
  --dropout P            dropout probability on the embedding, the attention
                         probabilities and the attention and MLP outputs, in
                         [0, 1); masks independent of the layout                 [0]
  --recompute R          activation recomputation: none|selective (attention core)|
                         full (each block, in backward)                       [none]
Mixture of experts (--model gpt):
  --moe-experts E        MoE MLPs with E experts (GELU MLPs h -> 4h -> h) and a
                         router (softmax, top-k) instead of the dense MLP (0: dense) [0]
  --moe-top-k K          experts per token, 1 (gate: its probability) or 2 (gates
                         renormalised)                                           [1]
  --moe-capacity C       capacity factor > 0 (each expert keeps at most
                         ceil(T·K·C/E) tokens of a routing group, the lowest
                         probability dropped first) or dropless                  [1]
  --moe-every F          blocks 0, F, 2F, ... are MoE blocks                      [1]
  --moe-group-tokens T   tokens per routing group (0: one sample's sequence; with
                         --cp it must divide S/U)                                [0]
  --moe-aux-loss A       load-balancing loss coefficient A·E·sum f_i·P_i       [0.01]
  --moe-z-loss B         router z-loss coefficient                               [0]
  --ep N                 expert-parallel degree: the experts split over N ranks of
                         the dp·cp replicas; N divides dp·cp and E               [1]
  The progress line adds the tokens each expert kept (summed over the MoE blocks
  and ranks), the drop rate and the mean aux loss per MoE block.
Environment: CHORUS_FASHION_MNIST_DIR (default /usr/share/datasets/fashion-mnist).
)";
}

}  // namespace chorus::train_tool
