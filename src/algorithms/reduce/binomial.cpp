// Binomial-tree reduce to any root.
//
// In the binomial tree rooted at `root` (patterns/binomial_tree.hpp) every
// rank receives the reduced values of its children's subtrees, shallowest first,
// folds each into its own, and sends the result to its parent. A subtree's
// result therefore covers exactly its ranks, and the root's covers all n, after
// ceil(log2 n) levels. The order of folding differs from a left-to-right sum,
// which our ops allow: they are commutative and associative (floating point up
// to rounding).
//
// Off the root `recv` is unused (it may be NULL): partial results live in
// scratch; leaves send their input directly.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/binomial_tree.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

void reduce_binomial(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int rank = transport.rank();
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  const int parent = patterns::binomial_parent(rank, args.root, n);
  RequestSet requests(transport, args);
  const void* result = args.send;
  Scratch partial, incoming;
  auto children = patterns::binomial_children(rank, args.root, n);
  if (!children.empty()) {
    partial = parent < 0 ? Scratch() : Scratch(args.count, args.dtype);
    incoming = Scratch(args.count, args.dtype);
  }
  void* accumulator = parent < 0 ? args.recv : partial.data();
  for (int child : children) {
    requests.recv(child, incoming.data(), bytes);
    requests.wait();
    reduce_into(accumulator, result, incoming.data(), args.count, args.dtype, args.op);
    result = accumulator;
  }
  if (parent >= 0) {
    requests.send(parent, result, bytes);
    requests.wait();
  }
}

}  // namespace chorus::algorithms
