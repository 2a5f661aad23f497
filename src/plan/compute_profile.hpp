// A compute profile: measured times of one GPT block (and, optionally, of every block, the
// embedding, the head and the optimizer) at one or several micro-batch sizes (docs/planner.md,
// "Compute profiles"). chorus-train writes it (--write-compute-profile) and reads it
// (--partition time); chorus-plan reads it (--compute-profile) and fits its compute model to it
// (compute_model.hpp). Plain C++, no torch, no communicator.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::plan {

/// The times at one micro-batch size, in ms: one block's mean forward and backward, the
/// embedding's and the head's (the final norm, logits and loss) forward and backward together.
struct SizeTimes {
  std::int64_t micro_batch = 0;
  double layer_forward_ms = 0, layer_backward_ms = 0, embedding_ms = 0, head_ms = 0;
};

/// A block's mean backward under selective and under full recomputation at one micro-batch
/// size, in ms (each with its forward run again).
struct RecomputeTimes {
  std::int64_t micro_batch = 0;
  double selective_backward_ms = 0, full_backward_ms = 0;
};

struct ComputeProfile {
  // The block the times were measured on: hidden, heads, sequence, micro-batch, tp degree,
  // and the vocabulary of the head (0: not given).
  std::int64_t hidden = 0, heads = 0, seq = 0, micro_batch = 0, vocab = 0;
  int tp = 1;
  double layer_forward_ms = 0;   ///< one block's forward (with per-block lines: their mean)
  double layer_backward_ms = 0;  ///< one block's backward
  /// Per block, in order: forward and backward ms ("layer I F B" lines); empty when not given.
  std::vector<double> block_forward_ms, block_backward_ms;
  double embedding_ms = 0;  ///< the embedding's forward and backward; 0: not given
  double head_ms = 0;       ///< the final norm, logits and loss, forward and backward; 0: not given
  /// Further micro-batch sizes ("at B F W E H" lines), each other than micro_batch.
  std::vector<SizeTimes> more_sizes;
  /// Backward times under recomputation ("recompute B S F" lines), each of one of sizes().
  std::vector<RecomputeTimes> recompute;
  /// The optimizer's step with the gradient clipping, per parameter; 0: not given.
  double optimizer_ns_per_parameter = 0;
  /// Processes that computed at once while the times were taken, each its own copy of the
  /// model (ranks that share a host's cores slow each other: a profile for a plan of R ranks
  /// per host is taken with R). A file without the "concurrency" line: 1.
  int concurrency = 1;

  /// Every size's times: micro_batch's (the main lines) first, then more_sizes.
  std::vector<SizeTimes> sizes() const;
};

/// Reads "key value" lines ('#' comments): hidden, heads, seq, micro_batch, tp (default 1),
/// layer_forward_ms, layer_backward_ms, and optionally vocab, embedding_ms, head_ms,
/// optimizer_ns_per_parameter, concurrency (a whole number >= 1; default 1), "layer I FORWARD_MS
/// BACKWARD_MS" for I = 0, 1, ... in order and "at B LAYER_FORWARD_MS LAYER_BACKWARD_MS
/// EMBEDDING_MS HEAD_MS" for other micro-batch sizes B (which need the embedding_ms and head_ms
/// lines) and "recompute B SELECTIVE_BACKWARD_MS FULL_BACKWARD_MS" for sizes B of the profile.
/// Throws Error(InvalidArgument) naming the line or the missing key.
ComputeProfile parse_compute_profile(std::istream& in, std::string_view source);
ComputeProfile load_compute_profile_file(const std::string& path);

/// `text` as a positive finite number; InvalidArgument "<where>: expected '<key> <positive
/// number>', got '<text>'" otherwise (the profiles' value check).
double positive_number(const std::string& where, const std::string& key, const std::string& text);

/// The text parse_compute_profile reads back (times to the microsecond's thousandth).
std::string format_compute_profile(const ComputeProfile& profile);

/// Every measured time of `profile`, in a fixed order that depends only on its shape (blocks,
/// sizes, recompute lines): the main size's four, the optimizer's, then each block's, size's
/// and recompute line's. Profiles of the same shape list their times alike, so ranks can
/// combine theirs element by element.
std::vector<double*> measured_times(ComputeProfile& profile);

}  // namespace chorus::plan
