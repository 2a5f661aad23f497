// Collective names and fingerprints.
#include "core/collective.hpp"

#include <array>
#include <cstdio>

namespace chorus {
namespace {

constexpr std::array<std::string_view, kNumCollectives> kNames = {
    "allreduce", "broadcast", "reduce",    "allgather", "reducescatter", "gather",
    "scatter",   "alltoall",  "alltoallv", "barrier",   "send",          "recv"};

}  // namespace

std::string_view to_string(Collective collective) noexcept {
  auto index = static_cast<std::size_t>(collective);
  return index < kNames.size() ? kNames[index] : "unknown collective";
}

bool parse_collective(std::string_view name, Collective* out) noexcept {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) {
      *out = static_cast<Collective>(i);
      return true;
    }
  }
  return false;
}

bool fingerprints_match(const Fingerprint& mine, const Fingerprint& theirs) noexcept {
  bool same_kind = mine.collective == theirs.collective ||
                   (is_point_to_point(mine.collective) && is_point_to_point(theirs.collective) &&
                    mine.collective != theirs.collective);
  return same_kind && mine.seq == theirs.seq && mine.count == theirs.count &&
         mine.root == theirs.root && mine.dtype == theirs.dtype && mine.op == theirs.op;
}

std::string describe(const Fingerprint& fp) {
  std::string text(to_string(fp.collective));
  text += " #" + std::to_string(fp.seq);
  if (fp.collective == Collective::Barrier) {
    if (fp.root == -1) return text;
    // comm/roots_digest.hpp: the roots of the rooted calls since the previous barrier.
    char digest[16];
    std::snprintf(digest, sizeof digest, "%08x", static_cast<unsigned>(fp.root));
    return text + " (after rooted calls whose roots digest to " + digest + ")";
  }
  text += " (count " + std::to_string(fp.count) + ", ";
  text += to_string(static_cast<DataType>(fp.dtype));
  if (has_reduce_op(fp.collective))
    text += ", " + std::string(to_string(static_cast<ReduceOp>(fp.op)));
  if (has_root(fp.collective)) text += ", root " + std::to_string(fp.root);
  return text + ")";
}

}  // namespace chorus
