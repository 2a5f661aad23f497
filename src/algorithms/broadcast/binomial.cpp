// Binomial-tree broadcast from any root.
//
// The root holds the data; every other rank receives it once from its parent
// in the tree rooted at `root` (patterns/binomial_tree.hpp) and forwards it to
// its children, largest subtree first so that the deepest branch starts
// earliest. Each rank is reached after at most ceil(log2 n) hops.
//
// Off the root `send` is unused (may be NULL); out of place the root also
// fills its own `recv`.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/binomial_tree.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(args, ctx);
  const int parent = patterns::binomial_parent(rank, args.root, n);
  if (parent < 0) {
    copy_elements(args.recv, args.send, args.count, args.dtype);
  } else {
    requests.recv(parent, args.recv, bytes);
    requests.wait();
  }
  auto children = patterns::binomial_children(rank, args.root, n);
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    requests.send(*child, args.recv, bytes);
  }
  requests.wait();
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  return message_cost(in, {s.lg, s.lg * in.m(), 0});
}

}  // namespace

const Algorithm rows::broadcast_binomial{
    .name = "binomial",
    .description = "binomial tree from the root, largest subtree first",
    .collective = Collective::Broadcast,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
