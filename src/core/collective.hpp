// The operations a communicator performs, and the fingerprint each message
// carries so that ranks in different calls notice (DESIGN.md, "Mismatches are named").
#pragma once

#include <chorus/types.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace chorus {

enum class Collective : std::uint8_t {
  AllReduce = 0,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  AllToAllV,
  Barrier,
  Send,
  Recv,
};
inline constexpr int kNumCollectives = 12;

/// "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "gather",
/// "scatter", "alltoall", "alltoallv", "barrier", "send", "recv".
std::string_view to_string(Collective collective) noexcept;
/// Parses the names above; false when unknown.
bool parse_collective(std::string_view name, Collective* out) noexcept;

/// All-reduce, reduce and reduce-scatter take a reduction operator.
constexpr bool has_reduce_op(Collective c) noexcept {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}
/// Broadcast, reduce, gather and scatter have a root.
constexpr bool has_root(Collective c) noexcept {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather ||
         c == Collective::Scatter;
}
constexpr bool is_point_to_point(Collective c) noexcept {
  return c == Collective::Send || c == Collective::Recv;
}

/// Identity of one call, identical on every rank taking part in it.
/// For send/recv `seq` counts the messages of that (sender, receiver) pair and
/// `root` is unused (-1); for collectives `seq` counts collectives on the communicator.
/// For all-to-all-v `count` is 0 (counts legitimately differ per rank). A barrier's `root`
/// digests the roots of the rooted calls since the previous barrier (-1: none), so that ranks
/// which disagreed on a root fail at the barrier at the latest (comm/roots_digest.hpp).
struct Fingerprint {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int32_t root = -1;
  Collective collective = Collective::Barrier;
  std::uint8_t dtype = 0;  ///< DataType value
  std::uint8_t op = 0;     ///< ReduceOp value, 0 when the call has none
  std::uint8_t reserved = 0;
};
static_assert(sizeof(Fingerprint) == 24);

/// True when a message stamped `theirs` belongs to the call stamped `mine`
/// (equal fields, except that a Send matches a Recv).
bool fingerprints_match(const Fingerprint& mine, const Fingerprint& theirs) noexcept;

/// "allreduce #7 (count 4, float32, sum)" — used in mismatch sentences.
std::string describe(const Fingerprint& fingerprint);

}  // namespace chorus
