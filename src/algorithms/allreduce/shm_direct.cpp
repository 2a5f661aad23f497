// All-reduce directly in the host arena.
//
// Small messages (one round): every rank copies its input into its buffer and
// posts; once all have, every rank reduces all n buffers into its own output,
// in rank order, so all ranks compute bit-identical results with one flag wait.
//
// Otherwise the message goes through the arena in chunks of one round buffer.
// Per round: each rank copies its chunk in, all but its own slice r
// (patterns::block_of), which only it reads, and posts 2g; once all have, rank r
// reduces slice r of its input (straight from send) and of every other buffer
// into slice r of its own buffer (only rank r touches slice r) and posts 2g + 1;
// every rank then copies slice j out of rank j's buffer. Round
// buffers alternate (host_arena.hpp), so a rank fills chunk g + 1 while slower
// ranks still copy chunk g out.
//
// Half types (Sum, Prod, Avg) travel through the arena as half types: the rank that
// reduces an element reads all n inputs of it, sums them in fp32 (algorithms/partials.hpp),
// divides an average, and rounds once.
//
// Reduce (reduce/shm_direct.cpp) is the same rounds in which only the root
// keeps the result: the others post and leave the copy-out (and, for one
// round, the reduction) to it.
#include "algorithms/allreduce/shm_direct.hpp"
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "core/copy.hpp"
#include "core/reduce.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {
namespace {

using transport::HostArena;

constexpr std::size_t kOneRoundBytes = 16 * 1024;  ///< redundant reduction below this

void allreduce_one_round(HostArena& arena, const Call& args, const Context& ctx, bool keeps_result,
                         int divisor) {
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  const std::uint64_t g = arena.begin_round(ctx.deadline, bytes);
  copy_bytes(arena.buffer(arena.rank(), g), args.send, bytes);
  arena.post(2 * g);
  if (!keeps_result) return;
  arena.wait_all(2 * g, ctx.deadline);
  Operands inputs(static_cast<std::size_t>(arena.size()));
  for (int k = 0; k < arena.size(); ++k) inputs.push_back(arena.buffer(k, g));
  reduce_all(args.recv, inputs, args.count, args, divisor);
}

/// One chunk of `count` elements at element `offset`.
void allreduce_chunk(HostArena& arena, const Call& args, const Context& ctx, std::size_t offset,
                     std::size_t count, bool keeps_result, int divisor) {
  const int n = arena.size();
  const int r = arena.rank();
  const std::uint64_t g = arena.begin_round(ctx.deadline, bytes_of(count, args.dtype));
  const auto own = patterns::block_of(count, n, r);
  const std::byte* input = element_at(args.send, offset, args.dtype);
  std::byte* buffer = arena.buffer(r, g);
  // Before and after the own slice: one copy each (slices are contiguous, in rank order).
  copy_bytes(buffer, input, bytes_of(own.offset, args.dtype));
  const std::size_t after = own.offset + own.count;
  copy_bytes(element_at(buffer, after, args.dtype), element_at(input, after, args.dtype),
             bytes_of(count - after, args.dtype));
  arena.post(2 * g);
  arena.wait_all(2 * g, ctx.deadline);
  std::byte* mine = element_at(buffer, own.offset, args.dtype);
  if (own.count > 0) {
    Operands inputs(static_cast<std::size_t>(n));
    inputs.push_back(element_at(input, own.offset, args.dtype));
    for (int k = (r + 1) % n; k != r; k = (k + 1) % n) {
      inputs.push_back(element_at(arena.buffer(k, g), own.offset, args.dtype));
    }
    reduce_all(mine, inputs, own.count, args, divisor);
  }
  arena.post(2 * g + 1);
  if (!keeps_result) return;
  for (int step = 0; step < n; ++step) {
    const int j = (r + step) % n;  // own slice first: it is ready
    if (j != r) arena.wait_for(j, 2 * g + 1, ctx.deadline);
    const auto slice = patterns::block_of(count, n, j);
    copy_bytes(element_at(args.recv, offset + slice.offset, args.dtype),
               element_at(arena.buffer(j, g), slice.offset, args.dtype),
               bytes_of(slice.count, args.dtype));
  }
}

}  // namespace

void reduce_through_arena(const Call& args, const Context& ctx, bool keeps_result) {
  if (finish_trivial_call(args, ctx)) return;
  HostArena& arena = begin_arena_call(args, ctx);
  const int divisor = fold_half_average(args, arena.size());
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  if (bytes <= std::min(kOneRoundBytes, arena.round_bytes())) {
    return allreduce_one_round(arena, args, ctx, keeps_result, divisor);
  }
  // Reduce: smaller rounds, so that the root copies one out while the others copy the next in.
  const std::size_t chunk = args.collective == Collective::Reduce
                                ? arena_pipeline_elements(args.count, args.dtype, arena)
                                : arena.round_bytes() / dtype_size(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    allreduce_chunk(arena, args, ctx, offset, std::min(chunk, args.count - offset), keeps_result,
                    divisor);
  }
}

namespace {

void run(const Call& args, const Context& ctx) { reduce_through_arena(args, ctx, true); }

double cost(const CostInput& in) {
  // Each rank writes its input to the arena and reads what it needs back, with two arena
  // synchronisations.
  const Shape s = in.shape();
  const double m = in.m();
  return arena_cost(in, 2, 3 * m, (s.n - 1) / s.n * m);
}

}  // namespace

const Algorithm rows::allreduce_shm_direct{
    .name = "shm_direct",
    .description = "one host: every rank reduces its slice of all inputs in the arena",
    .collective = Collective::AllReduce,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
