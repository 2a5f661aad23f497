// Binomial-tree scatter from any root: gather run backwards.
//
// The root first lays its n blocks out in relative order (relative w is rank
// (w + root) mod n), so that every subtree of the tree rooted at `root` is a
// contiguous range starting at its top rank (patterns/binomial_tree.hpp). A
// rank receives its whole subtree's range from its parent in one message,
// keeps the first block and forwards to each child the range of the child's
// subtree, at offset (child - rank). ceil(log2 n) steps instead of n - 1
// messages at the root.
//
// Off the root `send` is unused (may be NULL); leaves receive straight into `recv`.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/binomial_tree.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const int parent = patterns::binomial_parent(rank, args.root, n);
  const auto children = patterns::binomial_children(rank, args.root, n);
  RequestSet requests(args, ctx);
  if (children.empty()) {
    requests.recv(parent, args.recv, bytes_of(args.count, args.dtype));
    requests.wait();
    return;
  }
  const int me = patterns::relative_rank(rank, args.root, n);
  const auto subtree =
      static_cast<std::size_t>(patterns::binomial_subtree_size(rank, args.root, n));
  Scratch staged(subtree * args.count, args.dtype);
  if (parent < 0) {
    rotate_blocks(staged.data(), args.send, args.root, n, args.count,
                  args.dtype);  // rank root first
  } else {
    requests.recv(parent, staged.data(), bytes_of(subtree * args.count, args.dtype));
    requests.wait();
  }
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    auto offset = static_cast<std::size_t>(patterns::relative_rank(*child, args.root, n) - me);
    auto size = static_cast<std::size_t>(patterns::binomial_subtree_size(*child, args.root, n));
    requests.send(*child, staged.at(offset * args.count), bytes_of(size * args.count, args.dtype));
  }
  copy_elements(args.recv, staged.data(), args.count, args.dtype);
  requests.wait();
}

double cost(const CostInput& in) { return message_cost(in, binomial_gather_scatter_terms(in)); }

}  // namespace

const Algorithm rows::scatter_binomial{.name = "binomial",
                                       .description = "subtrees scattered down a binomial tree",
                                       .collective = Collective::Scatter,
                                       .cost = cost,
                                       .run = runs<run>};

}  // namespace chorus::algorithms
