// Binomial-tree broadcast from any root.
//
// The root holds the data; every other rank receives it once from its parent
// in the tree rooted at `root` (patterns/binomial_tree.hpp) and forwards it to
// its children, largest subtree first so that the deepest branch starts
// earliest. Each rank is reached after at most ceil(log2 n) hops.
//
// Off the root `send` is unused (may be NULL); out of place the root also
// fills its own `recv`.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/binomial_tree.hpp"

namespace chorus::algorithms {

void broadcast_binomial(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(transport, args);
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

}  // namespace chorus::algorithms
