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
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/binomial_tree.hpp"

namespace chorus::algorithms {

void gather_binomial(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const int parent = patterns::binomial_parent(rank, args.root, n);
  const auto children = patterns::binomial_children(rank, args.root, n);
  RequestSet requests(transport, args);
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

}  // namespace chorus::algorithms
