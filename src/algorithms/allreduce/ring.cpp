// Ring all-reduce = ring reduce-scatter + ring all-gather.
//
// The buffer is cut into n blocks whose sizes differ by at most one
// (patterns::block_of spreads the remainder, and blocks may be empty when
// count < n). The reduce-scatter pass leaves rank r with block r reduced over
// all ranks, written straight into its place in `recv`; the all-gather pass
// then circulates the n reduced blocks so every rank holds all of them. Each
// rank sends 2 (n - 1)/n of the buffer in 2 (n - 1) steps: the choice for large
// buffers.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/blocks.hpp"

namespace chorus::algorithms {

void allreduce_ring(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  auto own = patterns::block_of(args.count, transport.size(), transport.rank());
  ring_reduce_scatter_pass(transport, args, args.send, args.count,
                           element_at(args.recv, own.offset, args.dtype));
  ring_allgather_pass(transport, args, args.recv, args.count);
}

}  // namespace chorus::algorithms
