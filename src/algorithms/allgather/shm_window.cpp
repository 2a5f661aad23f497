// All-gather on buffers inside shared windows (algorithms/window.hpp).
//
// After the cards, rank r copies every rank j's block straight from j's input into block
// j of its own output (its own block too, unless in place: send == recv + r * count);
// then finish(), because peers read its input until they are done. Memory traffic per
// rank: n - 1 (or n) blocks copied, against shm_direct's own block copied in and n
// blocks copied out.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/window.hpp"
#include "core/copy.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  const int n = ctx.size();
  const int r = ctx.rank();
  const std::size_t block = bytes_of(args.count, args.dtype);
  WindowCall call(args, ctx, block, block * static_cast<std::size_t>(n));
  if (!call.usable()) return hand_over(rows::allgather_shm_direct, args, ctx);
  for (int step = 0; step < n; ++step) {
    const int j = (r + step) % n;  // own block first, then the peers in a staggered order
    std::byte* out = call.recv(r) + block * static_cast<std::size_t>(j);
    if (out != call.send(j)) copy_bytes(out, call.send(j), block);
  }
  call.finish();
  return nullptr;
}

double cost(const CostInput& in) { return arena_cost(in, 2, in.shape().n * in.m()); }

}  // namespace

const Algorithm rows::allgather_shm_window{
    .name = "shm_window",
    .description = "one host, buffers in shared windows: each rank copies the peers' blocks",
    .collective = Collective::AllGather,
    .needs = kNeedsArena | kNeedsSharedWindows,
    .cost = cost,
    .run = run,
    .accepts = accepts_shared_window};

}  // namespace chorus::algorithms
