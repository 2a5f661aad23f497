// All-reduce by single-copy reads of the peers' buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1:
//   reduce-scatter: rank r reads slice r (patterns::block_of) of every peer's
//     input, chunk by chunk into a cache-sized scratch buffer, and reduces it into
//     slice r of its own output; then it posts 2g ("slice r is final and I read
//     nobody's input any more");
//   all-gather: for every peer p, once p has posted 2g, rank r reads p's output
//     slice p into its own output slice p; then it posts 2g + 1 and waits until
//     every rank has, because peers read its buffers until then.
// In place (send == recv) is safe: during the reduce-scatter rank r writes only
// slice r of its buffer, which only rank r reads as input; in the all-gather it
// overwrites slice p only after p posted 2g, i.e. after p finished reading slice
// p of everyone's input. Each slice is reduced by one rank, so every rank ends
// with the same bits. Memory traffic per rank: (n - 1)/n of the message read
// from peers twice (kernel copies), 1/n reduced with n inputs, instead of the
// arena's copy in, reduction and copy out.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "core/reduce.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>

namespace chorus::algorithms {
namespace {

/// Bytes of a peer's slice read per cross-memory read before reducing them. Medians
/// of 3 runs at 2 ranks, 4 / 16 / 64 MiB messages (ms): 64 KiB chunks 2.8 / 15.8 /
/// 54, 256 KiB 1.9 / 12.3 / 37, 1 MiB 0.9 / 4.9 / 24, 4 MiB 1.1 / 7.0 / 55: fewer
/// system calls pay until the scratch no longer stays in cache.
constexpr std::size_t kReduceChunkBytes = 1024 * 1024;

/// Reduces slice `rank` of every rank's input into slice `rank` of args.recv. Half types
/// are summed in an fp32 chunk (algorithms/partials.hpp) and rounded once, by the last peer's
/// reduction.
void reduce_own_slice(CmaCall& call, const Call& args, int divisor) {
  const int n = call.arena().size();
  const int r = call.arena().rank();
  const DataType dtype = args.dtype;
  const DataType partial = partial_type(args);
  const auto own = patterns::block_of(args.count, n, r);
  const std::size_t chunk = std::max<std::size_t>(1, kReduceChunkBytes / dtype_size(partial));
  std::byte* scratch = cma_scratch(bytes_of(std::min(chunk, own.count), dtype));
  Scratch own_sum(partial == dtype ? 0 : std::min(chunk, own.count), partial);
  for (std::size_t done = 0; done < own.count; done += chunk) {
    const std::size_t first = own.offset + done;
    const std::size_t c = std::min(chunk, own.count - done);
    void* out = element_at(args.recv, first, dtype);
    void* sum = partial == dtype ? out : own_sum.data();  // the running result
    Operand current{element_at(args.send, first, dtype), dtype};
    for (int step = 1; step < n; ++step) {
      call.read_send((r + step) % n, bytes_of(first, dtype), scratch, bytes_of(c, dtype));
      const Operand theirs{scratch, dtype};
      if (step == n - 1) {
        reduce_operands(out, dtype, current, theirs, c, args.op, divisor);
      } else {
        reduce_operands(sum, partial, current, theirs, c, args.op);
      }
      current = {sum, partial};
    }
  }
}

/// Reads every peer's finished slice into args.recv as soon as that peer posted `flag`.
void gather_slices(CmaCall& call, const Call& args, const Context& ctx, std::uint64_t flag) {
  const int n = call.arena().size();
  const int r = call.arena().rank();
  for (int step = 1; step < n; ++step) {
    const int p = (r + step) % n;
    call.arena().wait_for(p, flag, ctx.deadline);
    const auto slice = patterns::block_of(args.count, n, p);
    call.read_recv(p, bytes_of(slice.offset, args.dtype),
                   element_at(args.recv, slice.offset, args.dtype),
                   bytes_of(slice.count, args.dtype));
  }
}

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  CmaCall call(args, ctx);
  if (!call.usable()) return hand_over(rows::allreduce_shm_direct, args, ctx);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  reduce_own_slice(call, args, fold_half_average(args, arena.size()));
  arena.post(2 * g);
  gather_slices(call, args, ctx, 2 * g);
  arena.post(2 * g + 1);
  arena.wait_all(2 * g + 1, ctx.deadline);
  return nullptr;
}

double cost(const CostInput& in) {
  // Cards, "slice final", "all read"; (n - 1)/n of the message read twice, 1/n reduced.
  const Shape s = in.shape();
  const double m = in.m();
  return cross_memory_cost(in, 3, 2 * (s.n - 1) / s.n * m, 0, (s.n - 1) / s.n * m);
}

}  // namespace

const Algorithm rows::allreduce_cma{
    .name = "cma",
    .description = "one host: reduce-scatter, all-gather by cross-memory reads of peer buffers",
    .collective = Collective::AllReduce,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
