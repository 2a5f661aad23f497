// A compute profile: measured times of one GPT block (and, optionally, of every block, the
// embedding and the head) at one shape (docs/planner.md, "Compute profiles"). chorus-train
// writes it (--write-compute-profile) and reads it (--partition time); chorus-plan reads it
// (--compute-profile) for its compute rates. Plain C++, no torch, no communicator.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::plan {

struct ComputeProfile {
  // The block the times were measured on: hidden, heads, sequence, micro-batch, tp degree.
  std::int64_t hidden = 0, heads = 0, seq = 0, micro_batch = 0;
  int tp = 1;
  double layer_forward_ms = 0;   ///< one block's forward (with per-block lines: their mean)
  double layer_backward_ms = 0;  ///< one block's backward
  /// Per block, in order: forward and backward ms ("layer I F B" lines); empty when not given.
  std::vector<double> block_forward_ms, block_backward_ms;
  double embedding_ms = 0;  ///< the embedding's forward and backward; 0: not given
  double head_ms = 0;       ///< the final norm, logits and loss, forward and backward; 0: not given
};

/// Reads "key value" lines ('#' comments): hidden, heads, seq, micro_batch, tp (default 1),
/// layer_forward_ms, layer_backward_ms, and optionally embedding_ms, head_ms and
/// "layer I FORWARD_MS BACKWARD_MS" for I = 0, 1, ... in order. Throws Error(InvalidArgument)
/// naming the line or the missing key.
ComputeProfile parse_compute_profile(std::istream& in, std::string_view source);
ComputeProfile load_compute_profile_file(const std::string& path);

/// `text` as a positive finite number; InvalidArgument "<where>: expected '<key> <positive
/// number>', got '<text>'" otherwise (the profiles' value check).
double positive_number(const std::string& where, const std::string& key, const std::string& text);

/// The text parse_compute_profile reads back (times to the microsecond's thousandth).
std::string format_compute_profile(const ComputeProfile& profile);

}  // namespace chorus::plan
