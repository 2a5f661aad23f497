// Command line of chorus-train: which model, how long, how to synchronise, checkpoints.
#pragma once

#include <cstdint>
#include <string>

namespace chorus::train_tool {

enum class ModelKind { Mlp, Lstm };
enum class Compression { None, Fp16, Bf16 };

struct Options {
  ModelKind model = ModelKind::Mlp;  ///< --model mlp|lstm
  int epochs = 1;                    ///< --epochs
  std::int64_t batch = 64;           ///< --batch: samples per rank per step
  std::int64_t steps = 0;  ///< --steps: stop after this many steps in total (0 = no limit)
  double lr = 0.0;         ///< --lr (0 = default: SGD 0.05 MLP, Adam 0.003 LSTM)
  bool no_sync = false;    ///< --no-sync: same compute, gradients not synchronised
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
  double bucket_cap_mb = 25.0;        ///< --bucket-cap-mb
  Compression compression = Compression::None;  ///< --compression none|fp16|bf16
  int threads = 1;                              ///< --threads: torch intra-op threads per rank
  std::int64_t log_every = 50;                  ///< --log-every N steps
  std::int64_t hidden = 0;  ///< --hidden: MLP width / LSTM state (0 = 1024 / 256)
  int layers = 3;           ///< --layers: MLP hidden layers
  bool eval = true;         ///< --no-eval skips the final test evaluation
  bool help = false;        ///< -h / --help
};

/// Parses argv[1..argc); throws chorus::Error(InvalidArgument) naming the bad option.
Options parse_options(int argc, const char* const argv[]);

/// The --help text.
std::string usage_text();

}  // namespace chorus::train_tool
