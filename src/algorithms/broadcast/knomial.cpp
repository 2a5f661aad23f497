// K-nomial-tree broadcast (radix patterns::kDefaultRadix = 4) from any root.
//
// Every rank but the root receives the data once from its parent in the
// radix-k tree rooted at `root` (patterns/knomial_tree.hpp) and forwards it to
// its children, largest subtree first. The depth is ceil(log_k n) instead of
// the binomial tree's ceil(log2 n), at the price of up to (k - 1) sends per
// level from one rank: fewer latencies where sends overlap well (small
// messages, shared memory). k = 2 would be the binomial tree.
//
// Off the root `send` is unused (may be NULL); out of place the root also
// fills its own `recv`.
#include "algorithms/patterns/knomial_tree.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const int radix = patterns::kDefaultRadix;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(args, ctx);
  const int parent = patterns::knomial_parent(rank, args.root, n, radix);
  if (parent < 0) {
    copy_elements(args.recv, args.send, args.count, args.dtype);
  } else {
    requests.recv(parent, args.recv, bytes);
    requests.wait();
  }
  auto children = patterns::knomial_children(rank, args.root, n, radix);
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    requests.send(*child, args.recv, bytes);
  }
  requests.wait();
}

double cost(const CostInput& in) {
  return message_cost(in, knomial_terms(in.machine.nranks, in.m(), false));
}

}  // namespace

const Algorithm rows::broadcast_knomial{
    .name = "knomial",
    .description = "radix-4 tree from the root, largest subtree first",
    .collective = Collective::Broadcast,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
