// Reduce-scatter directly in the host arena, one flag wait per round.
//
// Each rank's input is n blocks of `count` elements. A round moves pieces of c
// elements at offset `offset` of every block: rank r copies its n pieces into
// its round buffer (piece j at j * c), posts 2g, and once every rank has, sums
// piece r of all n buffers straight into its output. Reading ends before the
// rank posts round g + 1, which is what the buffer reuse rule needs
// (host_arena.hpp). In place, the output overlaps only input block r's piece,
// which was copied into the arena first. Half types travel as half types and are summed
// from all n pieces in fp32 and rounded once (algorithms/partials.hpp).
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "core/copy.hpp"
#include "core/reduce.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {
namespace {

using transport::HostArena;

void reduce_scatter_round(HostArena& arena, const Call& args, const Context& ctx,
                          std::size_t offset, std::size_t c, int divisor) {
  const int n = arena.size();
  const int r = arena.rank();
  const std::size_t piece = bytes_of(c, args.dtype);
  const std::uint64_t g = arena.begin_round(ctx.deadline, piece * n);
  std::byte* mine = arena.buffer(r, g);
  for (int j = 0; j < n; ++j) {
    copy_bytes(mine + piece * j, element_at(args.send, j * args.count + offset, args.dtype), piece);
  }
  arena.post(2 * g);
  arena.wait_all(2 * g, ctx.deadline);
  Operands inputs(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) inputs.push_back(arena.buffer(k, g) + piece * r);
  reduce_all(element_at(args.recv, offset, args.dtype), inputs, c, args, divisor);
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  HostArena& arena = begin_arena_call(args, ctx);
  const int divisor = fold_half_average(args, arena.size());
  const std::size_t chunk = arena.round_bytes() / (dtype_size(args.dtype) * arena.size());
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    reduce_scatter_round(arena, args, ctx, offset, std::min(chunk, args.count - offset), divisor);
  }
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return arena_cost(in, 2, 2 * s.n * m, (s.n - 1) * m);
}

}  // namespace

const Algorithm rows::reduce_scatter_shm_direct{
    .name = "shm_direct",
    .description = "one host: every rank reduces its block of all inputs in the arena",
    .collective = Collective::ReduceScatter,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
