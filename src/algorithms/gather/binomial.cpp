// Binomial-tree gather to any root.
//
// In the tree rooted at `root` the subtree of a rank is a contiguous range of
// relative ranks starting at the rank itself (patterns/binomial_tree.hpp).
// Each rank collects its subtree's blocks in relative order — its own block
// first, then each child's whole subtree at offset (child - rank) — and sends
// the range to its parent in one message. The root ends with all n blocks in
// relative order and rotates them into rank order: relative w belongs to rank
// (w + root) mod n. ceil(log2 n) steps instead of n - 1 messages at the root.
//
// Off the root `recv` is unused (may be NULL); leaves send their input directly.
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
    requests.send(parent, args.send, bytes_of(args.count, args.dtype));
    requests.wait();
    return;
  }
  const int me = patterns::relative_rank(rank, args.root, n);
  const auto subtree =
      static_cast<std::size_t>(patterns::binomial_subtree_size(rank, args.root, n));
  Scratch gathered(subtree * args.count, args.dtype);
  copy_elements(gathered.data(), args.send, args.count, args.dtype);
  for (int child : children) {
    auto offset = static_cast<std::size_t>(patterns::relative_rank(child, args.root, n) - me);
    auto size = static_cast<std::size_t>(patterns::binomial_subtree_size(child, args.root, n));
    requests.recv(child, gathered.at(offset * args.count), bytes_of(size * args.count, args.dtype));
  }
  requests.wait();
  if (parent >= 0) {
    requests.send(parent, gathered.data(), bytes_of(subtree * args.count, args.dtype));
    requests.wait();
  } else {
    // Relative w belongs to rank (w + root) mod n: relative n-root.. come first in rank order.
    rotate_blocks(args.recv, gathered.data(), n - args.root, n, args.count, args.dtype);
  }
}

double cost(const CostInput& in) { return message_cost(in, binomial_gather_scatter_terms(in)); }

}  // namespace

const Algorithm rows::gather_binomial{.name = "binomial",
                                      .description = "subtrees gathered up a binomial tree",
                                      .collective = Collective::Gather,
                                      .cost = cost,
                                      .run = runs<run>};

}  // namespace chorus::algorithms
