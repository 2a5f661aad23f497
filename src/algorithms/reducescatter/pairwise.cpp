// Pairwise-exchange reduce-scatter.
//
// At step k in [1, n) rank r sends its contribution to block r + k straight to
// that rank and receives rank r - k's contribution to its own block r, which
// it folds into its result (patterns/pairwise.hpp: every ordered pair meets
// once). Each rank sends (n - 1)/n of its input, like the ring, but every
// block travels one hop unreduced, so no step waits on a predecessor's
// reduction: n - 1 rounds, and the reductions of one rank are independent of
// the others'.
//
// In place `recv` is block r of `send`; only that block is ever written and it
// is never sent, so no snapshot is needed.
//
// Half types: blocks travel unreduced, in the half type; the running sum is kept in fp32
// (algorithms/partials.hpp) and rounded once, by the last step.
#include "algorithms/patterns/pairwise.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

void reduce_scatter_pairwise(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  auto block = [&](int index) {
    return element_at(args.send, static_cast<std::size_t>(index) * args.count, args.dtype);
  };
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  Scratch own_sum(partial == args.dtype ? 0 : args.count, partial);
  void* sum = partial == args.dtype ? args.recv : own_sum.data();  // the running result
  Operand current{block(rank), args.dtype};
  Scratch incoming(args.count, args.dtype);
  RequestSet requests(transport, args);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    requests.exchange(peers.send_to, block(peers.send_to), bytes, peers.recv_from, incoming.data(),
                      bytes);
    const Operand theirs{incoming.data(), args.dtype};
    if (step == n - 1) {
      reduce_operands(args.recv, args.dtype, current, theirs, args.count, args.op, divisor);
    } else {
      reduce_operands(sum, partial, current, theirs, args.count, args.op);
    }
    current = {sum, partial};
  }
}

}  // namespace chorus::algorithms
