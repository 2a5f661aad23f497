// Command line of chorus-train: which model, how long, how to synchronise, checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train_tool {

enum class ModelKind { Mlp, Lstm, Gpt };
enum class OptimizerKind { Sgd, Adam };
enum class Compression { None, Fp16, Bf16 };
enum class Recomputation { None, Selective, Full };  ///< train::Recompute, without torch
enum class Precision { Fp32, Bf16, Fp16 };           ///< the compute type (--mixed-precision)

/// What parse_options returns: every value checked and every default resolved (--hidden,
/// --optimizer and --lr have defaults that depend on the model and the optimizer).
struct Options {
  ModelKind model = ModelKind::Mlp;  ///< --model mlp|lstm|gpt
  int epochs = 1;                    ///< --epochs
  /// --batch: samples per data-parallel replica per step (default 64; gpt 8)
  std::int64_t batch = 64;
  std::int64_t steps = 0;  ///< --steps: stop after this many steps in total (0 = no limit)
  /// --optimizer sgd|adam (default: sgd with momentum 0.9 for the MLP, adam for the LSTM)
  OptimizerKind optimizer = OptimizerKind::Sgd;
  double lr = 0.05;      ///< --lr > 0 (default: sgd 0.05, adam 0.003)
  bool no_sync = false;  ///< --no-sync: same compute, gradients not synchronised
  /// --zero 1|2|3: ZeRO stage (optimizer state; at 2 gradients; at 3 parameters); 0 = DDP
  int zero = 0;
  /// --mixed-precision bf16|fp16 (with --zero): compute copies of that type, fp32 master shards
  Precision mixed_precision = Precision::Fp32;
  /// --alternate-sync K: blocks of K synchronised steps alternate with blocks of K steps that
  /// skip synchronisation (each followed by an untimed barrier), in the same processes; the
  /// summary gives both medians (0 = off).
  std::int64_t alternate_sync = 0;
  bool shared_buckets = true;         ///< --no-shared-buckets: buckets in ordinary memory
  bool overlap = true;                ///< --no-overlap: every bucket all-reduced after backward
  std::string checkpoint;             ///< --checkpoint path: saved at the end (and every N steps)
  std::int64_t checkpoint_every = 0;  ///< --checkpoint-every N (0 = only at the end)
  bool resume = false;                ///< --resume: continue from --checkpoint if it exists
  std::uint64_t seed = 1;             ///< --seed: initial weights and data order
  double bucket_cap_mb = 25.0;        ///< --bucket-cap-mb, in [kMinBucketCapMb, kMaxBucketCapMb]
  Compression compression = Compression::None;  ///< --compression none|fp16|bf16
  int threads = 1;                              ///< --threads: torch intra-op threads per rank
  std::int64_t log_every = 50;                  ///< --log-every N steps
  /// --hidden: MLP width / LSTM state / GPT width (default 1024 / 256 / 64)
  std::int64_t hidden = 1024;
  int layers = 3;  ///< --layers: MLP hidden layers / GPT blocks (default 3 / 2)
  // GPT only (--model gpt):
  int tp = 1;  ///< --tp: tensor-parallel degree
  int cp = 1;  ///< --cp: context-parallel degree
  int pp = 1;  ///< --pp: pipeline stages
  int dp = 0;  ///< --dp: data-parallel degree, world / (tp·cp·pp) when 0 (else checked against it)
  std::string schedule = "1f1b";  ///< --schedule gpipe|1f1b|interleaved|zb-h1
  int virtual_stages = 0;   ///< --virtual-stages V: chunks per rank (0: interleaved 2, else 1)
  int micro_batches = 1;    ///< --micro-batches M: --batch splits into M (B % M == 0)
  bool pp_dry_run = false;  ///< --pp-dry-run: print the schedule's timeline and exit
  /// --partition params|time|L1,L2,...: blocks per stage balanced by parameter count, by
  /// measured time, or as listed (partition_layers, one count per virtual stage)
  std::string partition = "params";
  std::vector<std::int64_t> partition_layers;
  std::string compute_profile;        ///< --compute-profile FILE: --partition time's times
  std::string write_compute_profile;  ///< --write-compute-profile FILE: profile, write, exit
  std::string timeline_svg;           ///< --timeline-svg FILE: the schedule's or last step's
  double synthetic_compute = 0;       ///< --synthetic-compute MS (0: real compute)
  bool peak_memory = false;           ///< --peak-memory: report the peak bytes torch held
  bool sequence_parallel = false;     ///< --sequence-parallel (needs --model gpt)
  std::int64_t heads = 4;             ///< --heads: attention heads
  std::int64_t seq_len = 64;          ///< --seq-len: tokens per sample
  std::string corpus;                 ///< --corpus DIR of fortune files (default kFortunesDir)
  std::int64_t eval_every = 50;       ///< --eval-every N: validation loss every N steps (0 = end)
  std::int64_t eval_windows = 256;    ///< --eval-windows W: validation samples used (0 = all)
  bool eval = true;                   ///< --no-eval skips the final test evaluation
  bool help = false;                  ///< -h / --help

  // GPT dropout and activation recomputation (--model gpt):
  double dropout = 0;  ///< --dropout P in [0, 1): the probability of every dropout site
  Recomputation recompute = Recomputation::None;  ///< --recompute none|selective|full

  // Mixture of experts (--model gpt): MoE MLPs in every --moe-every-th block.
  std::int64_t moe_experts = 0;       ///< --moe-experts E (0: dense MLPs)
  int moe_top_k = 1;                  ///< --moe-top-k 1|2
  double moe_capacity = 1.0;          ///< --moe-capacity C > 0, or dropless
  bool moe_dropless = false;          ///< --moe-capacity dropless
  std::int64_t moe_every = 1;         ///< --moe-every F: blocks 0, F, 2F, ... are MoE blocks
  std::int64_t moe_group_tokens = 0;  ///< --moe-group-tokens T (0: one sample's sequence)
  double moe_aux_loss = 1e-2;         ///< --moe-aux-loss α
  double moe_z_loss = 0;              ///< --moe-z-loss β
  int ep = 1;                         ///< --ep: expert-parallel degree, divides dp·cp and E
};

inline constexpr double kMinBucketCapMb = 0.001;  ///< 1 KiB-ish: about a bucket per tensor
inline constexpr double kMaxBucketCapMb = 65536;  ///< 64 GiB: one bucket for any model here

/// Parses argv[1..argc); throws chorus::Error(InvalidArgument) naming the bad option and its
/// value (a number out of its range, an option that needs another one, an unknown option).
Options parse_options(int argc, const char* const argv[]);

/// "sgd" or "adam".
std::string optimizer_name(OptimizerKind kind);

/// "none", "selective" or "full".
std::string recomputation_name(Recomputation kind);

/// The --help text.
std::string usage_text();

}  // namespace chorus::train_tool
