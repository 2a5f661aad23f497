// All-reduce on buffers inside shared windows (algorithms/window.hpp): no copy through
// the arena.
//
// After the cards, each rank r reduces slice r (patterns::block_of) of every rank's
// input, chunk by chunk into its own output, and copies each finished chunk into slice r
// of every peer's output; then finish(). An average (Avg lowered to Sum) is divided chunk
// by chunk before the copies.
//
// In place (send == recv) is safe: slice r of any rank's buffers is read and written by
// rank r alone, which writes a chunk only after reading it. Every element is reduced by
// one rank, so all ranks hold the same bits. Memory traffic per rank: the message read
// once and written once, against shm_direct's copy in, reduction and copy out.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/window.hpp"
#include "core/copy.hpp"

#include <algorithm>

namespace chorus::algorithms {
namespace {

void reduce_and_scatter_slice(const WindowCall& call, const Call& args, int n, int r) {
  const auto own = patterns::block_of(args.count, n, r);
  const std::size_t chunk = call.chunk_elements();
  for (std::size_t done = 0; done < own.count; done += chunk) {
    const std::size_t first = own.offset + done;
    const std::size_t c = std::min(chunk, own.count - done);
    std::byte* out = element_at(call.recv(r), first, args.dtype);
    call.reduce_inputs(first, c, out);
    for (int step = 1; step < n; ++step) {
      copy_bytes(element_at(call.recv((r + step) % n), first, args.dtype), out,
                 bytes_of(c, args.dtype));
    }
  }
}

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  WindowCall call(args, ctx, bytes, bytes);
  if (!call.usable()) return hand_over(rows::allreduce_shm_direct, args, ctx);
  reduce_and_scatter_slice(call, args, ctx.size(), ctx.rank());
  call.finish();
  return nullptr;
}

double cost(const CostInput& in) {
  // The cards and "done" are arena synchronisations; each rank reads the message once (its
  // slice of every input) and writes it once (its slice of every output).
  const Shape s = in.shape();
  const double m = in.m();
  return arena_cost(in, 2, 2 * m, (s.n - 1) / s.n * m);
}

}  // namespace

const Algorithm rows::allreduce_shm_window{
    .name = "shm_window",
    .description = "one host, buffers in shared windows: each rank reduces its slice in place",
    .collective = Collective::AllReduce,
    .needs = kNeedsArena | kNeedsSharedWindows,
    .cost = cost,
    .run = run,
    .folding = Folding::Averages,
    .accepts = accepts_shared_window};

}  // namespace chorus::algorithms
