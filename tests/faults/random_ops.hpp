// Random collectives with data whose result has a closed form, shared by the
// fault-injection worker and the soak tool. Every rank of a communicator draws the
// same sequence from the same seed, so they issue the same calls; the result of
// each call is checked element by element against a reference computed here,
// independently of the library (tests/comm/reference.hpp for reductions; for data
// movement, every element names its source rank and position).
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace chorus::faults {

enum class OpKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  AllToAllV,
  Barrier,
  SendRecvRing,
};
inline constexpr int kNumOpKinds = 11;

struct OpSpec {
  OpKind kind = OpKind::Barrier;
  std::size_t count = 0;  ///< elements per rank (per peer for all-to-all)
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::uint32_t root_draw = 0;  ///< the root is root_draw % size of the communicator used
  bool in_place = false;
  std::uint32_t salt = 0;  ///< varies the moved values from call to call
};

/// The next call: kind, dtype and op uniform; count log-uniform in [0, max_count].
OpSpec draw_op(std::mt19937_64& rng, std::size_t max_count);

/// "allreduce count 17 float32 sum in-place" for messages.
std::string describe(const OpSpec& spec);

/// Runs `spec` on `comm` and returns how many elements came out wrong. Library
/// failures propagate as chorus::Error.
std::size_t run_checked(Communicator& comm, const OpSpec& spec);

/// Bytes one rank hands to the call (for throughput figures).
std::size_t payload_bytes(const OpSpec& spec, int ranks);

}  // namespace chorus::faults
