// chorus-perf's command line (nccl-tests spelling).
#pragma once

#include <chorus/types.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace chorus::perf {

struct Options {
  std::size_t min_bytes = 32u << 20;  ///< -b
  std::size_t max_bytes = 32u << 20;  ///< -e
  double step_factor = 2;             ///< -f: next size = size * factor
  std::size_t step_bytes = 0;         ///< -i: next size = size + step (when > 0, instead of -f)
  int iters = 20;                     ///< -n: timed iterations
  int warmup = 5;                     ///< -w: untimed iterations before them
  bool check = true;                  ///< -c 0|1
  std::vector<DataType> dtypes{DataType::Float32};    ///< -d name|all
  std::vector<ReduceOp> ops{ReduceOp::Sum};           ///< -o name|all
  int root = 0;                                       ///< -r
  std::vector<std::string> collectives{"allreduce"};  ///< -t name|all
  std::optional<std::string> algorithm;               ///< -a: exported as CHORUS_ALGO
  bool in_place = false;                              ///< -z: also time the in-place form
  bool shared = false;                   ///< --shared: buffers from Communicator::alloc_shared
  bool help = false;                     ///< -h
  std::optional<std::string> tune_file;  ///< --tune FILE: measure the cost model, write FILE
};

/// Parses argv[1..argc). Throws Error(InvalidArgument) naming the bad option or value, or a
/// range of more sizes than message_sizes allows.
Options parse_options(int argc, const char* const argv[]);

/// "64K" -> 65536: an integer with an optional K/M/G suffix (powers of 1024).
/// Throws Error(InvalidArgument) naming `option` when malformed or overflowing.
std::size_t parse_size(const std::string& option, const std::string& text);

/// The message sizes to run, in bytes: min, then *factor (or +step) while <= max.
/// Throws Error(InvalidArgument) naming the count and what to change when there are more
/// than 10000 (parse_options already refuses such a range).
std::vector<std::size_t> message_sizes(const Options& options);

std::string usage_text();

}  // namespace chorus::perf
