// What the planner knows of a GPT model and a layout: parameter counts, FLOPs and activation
// bytes per rank (docs/planner.md, "Formulas"). Pure arithmetic, no torch: the same formulas
// docs/parallel.md derives for Chorus's GPT model (activation bytes exact to the byte for the
// dense fp32 model without dropout, bench/gpt/activation_memory.py).
#pragma once

#include <cstdint>
#include <string>

namespace chorus::plan {

/// The GPT of docs/parallel.md: pre-LayerNorm blocks, fused QKV, GELU MLP h -> ffn -> h (or,
/// with experts > 0, a mixture of `experts` such MLPs with top-k routing), tied embedding.
struct ModelConfig {
  std::int64_t layers = 2;
  std::int64_t hidden = 64;
  std::int64_t heads = 4;
  std::int64_t vocab = 256;
  std::int64_t seq = 64;
  std::int64_t ffn = 0;      ///< MLP (and expert) inner size; 0: 4 * hidden
  std::int64_t experts = 0;  ///< 0: dense MLPs
  std::int64_t top_k = 1;    ///< experts per token (1 or 2)
  bool dropout = false;      ///< dropout on (its masks are kept for backward)

  std::int64_t ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  bool moe() const { return experts > 0; }
  /// Every parameter of the model (the tied embedding once).
  double parameters() const;
  /// "" when the sizes make sense, else one sentence naming the bad value.
  std::string problem() const;
};

/// Bytes per element of what training keeps.
struct Precision {
  std::string name = "fp32";  ///< fp32 (Chorus's model) or bf16 (mixed precision)
  double activation = 4;      ///< B: bytes per activation element
  double mask = 4;            ///< M: bytes per dropout-mask element
  double parameter = 4;       ///< the working copy of a parameter
  double gradient = 4;
  double optimizer = 8;  ///< K: Adam's state per parameter (bf16 mixed: fp32 master + 2 moments)

  static Precision fp32();
  static Precision bf16();
};

enum class Recompute { None, Selective, Full };
enum class Schedule { OneFOneB, Interleaved, GPipe };
const char* to_string(Recompute recompute);
const char* to_string(Schedule schedule);

/// One point of the search space (PARALLEL.md section 1: world = pp * dp * cp * tp; ep splits
/// dp * cp).
struct Layout {
  int tp = 1, pp = 1, cp = 1, ep = 1, dp = 1;
  bool sequence_parallel = false;
  int zero = 0;  ///< ZeRO stage 0-3 over the data-parallel ranks
  Recompute recompute = Recompute::None;
  Schedule schedule = Schedule::OneFOneB;
  int virtual_stages = 1;          ///< chunks per pipeline rank (interleaved only)
  std::int64_t micro_batches = 1;  ///< m per step
  std::int64_t micro_batch = 1;    ///< b: samples per micro-batch
  /// "tp 2 pp 1 cp 1 ep 1 dp 4 sp zero 1 recompute none 1f1b m 4 b 2".
  std::string describe() const;
};

/// Layers of the heaviest pipeline stage: ceil(layers / pp).
std::int64_t stage_layers(const ModelConfig& model, const Layout& layout);

/// A rank's share of one block's parameters: the attention and dense MLP split over tp (their
/// LayerNorms and row-parallel biases replicated), experts split over ep (each expert whole).
struct BlockParameters {
  double dense = 0;    ///< reduced over dp * cp
  double experts = 0;  ///< reduced over the expert-data-parallel group
};
BlockParameters block_parameters(const ModelConfig& model, const Layout& layout);
/// The embedding's rows on a rank (vocabulary over tp) plus the position embedding.
double embedding_parameters(const ModelConfig& model, const Layout& layout);

/// Forward FLOPs of one block for one micro-batch on one rank (the attention core over the
/// whole sequence for the rank's a/(t*u) heads; experts on the rank's share of the tokens).
double block_forward_flops(const ModelConfig& model, const Layout& layout);
/// Forward FLOPs of the attention core alone (what selective recomputation runs again).
double attention_core_flops(const ModelConfig& model, const Layout& layout);
/// Forward FLOPs of the logits (tied LM head) for one micro-batch on one rank.
double head_forward_flops(const ModelConfig& model, const Layout& layout);

/// Bytes one block's element-wise kernels read and write in memory for one micro-batch on one
/// rank (docs/planner.md, "Memory traffic"): the LayerNorms, the residual adds (with their
/// dropout), the MLP's bias and GELU, and the attention matrix between q.k^T and .v (written,
/// softmax, dropout, read). The matrix products' own operands are not counted.
struct MemoryTraffic {
  double forward = 0;
  double backward = 0;
  double attention_forward = 0;  ///< the attention matrix's share of `forward`
};
MemoryTraffic block_memory_traffic(const ModelConfig& model, const Layout& layout,
                                   const Precision& precision);

/// Bytes one block keeps for backward for one micro-batch, without recomputation.
double block_activation_bytes(const ModelConfig& model, const Layout& layout,
                              const Precision& precision);
/// What one block keeps under `layout.recompute` for one micro-batch.
double kept_activation_bytes(const ModelConfig& model, const Layout& layout,
                             const Precision& precision);

}  // namespace chorus::plan
