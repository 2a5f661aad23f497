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

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void broadcast_knomial(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const int radix = patterns::kDefaultRadix;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(transport, args);
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

}  // namespace chorus::algorithms
