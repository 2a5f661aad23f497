// Reduce-scatter on buffers inside shared windows (algorithms/window.hpp).
//
// After the cards, rank r reduces block r of every rank's input (n blocks of `count`
// elements each) straight into its own output, chunk by chunk; then finish(), because
// peers read its input until they are done. In place (recv == send + r * count) is safe:
// block r of any rank's input is read by rank r alone. Memory traffic per rank: n blocks
// read, one written, against shm_direct's n blocks copied in and n read back.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/window.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  const int n = ctx.size();
  const int r = ctx.rank();
  const std::size_t block = bytes_of(args.count, args.dtype);
  WindowCall call(args, ctx, block * static_cast<std::size_t>(n), block);
  if (!call.usable()) return hand_over(rows::reduce_scatter_shm_direct, args, ctx);
  const std::size_t chunk = call.chunk_elements();
  const std::size_t own = static_cast<std::size_t>(r) * args.count;
  for (std::size_t done = 0; done < args.count; done += chunk) {
    const std::size_t c = std::min(chunk, args.count - done);
    call.reduce_inputs(own + done, c, element_at(call.recv(r), done, args.dtype));
  }
  call.finish();
  return nullptr;
}

double cost(const CostInput& in) {
  // n blocks read, one written.
  const Shape s = in.shape();
  const double m = in.m();
  return arena_cost(in, 2, (s.n + 1) / 2 * m, (s.n - 1) * m);
}

}  // namespace

const Algorithm rows::reduce_scatter_shm_window{
    .name = "shm_window",
    .description = "one host, buffers in shared windows: each rank reduces its block in place",
    .collective = Collective::ReduceScatter,
    .needs = kNeedsArena | kNeedsSharedWindows,
    .cost = cost,
    .run = run,
    .folding = Folding::Averages,
    .accepts = accepts_shared_window};

}  // namespace chorus::algorithms
