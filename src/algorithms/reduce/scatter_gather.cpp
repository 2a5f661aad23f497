// Reduce = pairwise reduce-scatter + a gather of the reduced blocks at the root.
//
// The buffer is cut into n blocks (patterns::block_of); pairwise_reduce_scatter_pass leaves
// each rank with its block reduced over every rank (the root's straight in its `recv`, the
// others' in a scratch block), and every other rank then sends its block to the root, which
// receives them all at once. Each rank sends 2 (n - 1)/n of the buffer at most, against the
// tree's log2 n whole buffers through the root's link: the choice for large messages, and for
// float16/bfloat16 whose tree would carry fp32 partial results (algorithms/partials.hpp)
// where here only the caller's half types travel.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const auto own = patterns::block_of(args.count, n, rank);
  const bool root = rank == args.root;
  Scratch reduced(root ? 0 : own.count, args.dtype);
  void* out = root ? element_at(args.recv, own.offset, args.dtype) : reduced.data();
  pairwise_reduce_scatter_pass(args, ctx, args.send, args.count, out);
  RequestSet requests(args, ctx);
  if (!root) {
    requests.send(args.root, out, bytes_of(own.count, args.dtype));
  } else {
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      const auto block = patterns::block_of(args.count, n, r);
      requests.recv(r, element_at(args.recv, block.offset, args.dtype),
                    bytes_of(block.count, args.dtype));
    }
  }
  requests.wait();
}

double cost(const CostInput& in) {
  // The reduce-scatter's n - 1 steps of unreduced blocks, then the root receives n - 1 blocks
  // at once. TCP on one host: every rank's bytes cost the shared cores (as for the binomial
  // gather, cost_model.hpp), n (n - 1)/n of the buffer in the reduce-scatter and (n - 1)/n in
  // the gather, where the tree sends n - 1 buffers in all.
  const Shape s = in.shape();
  const double m = in.m();
  const double block = m / s.n;
  const bool loopback_tcp = in.machine.num_hosts() == 1 && !in.machine.local_shm;
  const double moved = loopback_tcp ? (s.n + 1) * (s.n - 1) * block : 2 * (s.n - 1) * block;
  return message_cost(in, {s.n, moved, (s.n - 1) * block});
}

}  // namespace

const Algorithm rows::reduce_scatter_gather{
    .name = "scatter_gather",
    .description = "pairwise reduce-scatter, then every rank sends its reduced block to the root",
    .collective = Collective::Reduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
