// K-nomial-tree reduce (radix patterns::kDefaultRadix = 4) to any root.
//
// In the radix-k tree rooted at `root` (patterns/knomial_tree.hpp) a rank
// posts the receives of all its children's partial results at once, folds
// them in as they are complete (nearest child first), and sends its result to
// its parent. Each subtree's result covers exactly its ranks, so the root's
// covers all n after ceil(log_k n) levels. Our ops are commutative and
// associative (floating point up to rounding), so the folding order is free.
//
// Off the root `recv` is unused (it may be NULL): partial results live in
// scratch; leaves send their input directly.
#include "algorithms/patterns/knomial_tree.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/reduce.hpp"

#include <vector>

namespace chorus::algorithms {

void reduce_knomial(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const int radix = patterns::kDefaultRadix;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  const int parent = patterns::knomial_parent(rank, args.root, n, radix);
  auto children = patterns::knomial_children(rank, args.root, n, radix);
  RequestSet requests(transport, args);
  const void* result = args.send;
  Scratch partial, incoming;
  std::vector<transport::RequestId> ids;
  if (!children.empty()) {
    partial = parent < 0 ? Scratch() : Scratch(args.count, args.dtype);
    incoming = Scratch(children.size() * args.count, args.dtype);
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    ids.push_back(requests.recv(children[i], incoming.at(i * args.count), bytes));
  }
  void* accumulator = parent < 0 ? args.recv : partial.data();
  for (std::size_t i = 0; i < children.size(); ++i) {
    requests.wait_for(ids[i]);
    reduce_into(accumulator, result, incoming.at(i * args.count), args.count, args.dtype, args.op);
    result = accumulator;
  }
  if (parent >= 0) {
    requests.send(parent, result, bytes);
    requests.wait();
  }
}

}  // namespace chorus::algorithms
