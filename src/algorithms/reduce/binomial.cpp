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
//
// Half types: leaves send their input in the half type, every other rank its partial result
// in fp32 (algorithms/partials.hpp); the root rounds once, when it folds in its last child.
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/binomial_tree.hpp"
#include "core/reduce.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  const int parent = patterns::binomial_parent(rank, args.root, n);
  RequestSet requests(args, ctx);
  // What a rank sends up: a leaf its input, any other rank a partial result.
  auto sent_type = [&](int r) {
    return patterns::binomial_children(r, args.root, n).empty() ? args.dtype : partial;
  };
  Operand result{args.send, args.dtype};
  Scratch partial_sum, incoming;
  auto children = patterns::binomial_children(rank, args.root, n);
  // The root's running result is recv itself when partials have the caller's dtype.
  const bool in_recv = parent < 0 && partial == args.dtype;
  if (!children.empty()) {
    partial_sum = in_recv ? Scratch() : Scratch(args.count, partial);
    incoming = Scratch(args.count, partial);
  }
  void* accumulator = in_recv ? args.recv : partial_sum.data();
  for (std::size_t i = 0; i < children.size(); ++i) {
    const DataType type = sent_type(children[i]);
    requests.recv(children[i], incoming.data(), bytes_of(args.count, type));
    requests.wait();
    const Operand theirs{incoming.data(), type};
    if (parent < 0 && i + 1 == children.size()) {
      reduce_operands(args.recv, args.dtype, result, theirs, args.count, args.op, divisor);
    } else {
      reduce_operands(accumulator, partial, result, theirs, args.count, args.op);
    }
    result = {accumulator, partial};
  }
  if (parent >= 0) {
    requests.send(parent, result.data, bytes_of(args.count, result.dtype));
    requests.wait();
  }
}

double cost(const CostInput& in) {
  // The root receives lg messages: one from a leaf (unreduced input), the others partial
  // results (twice the bytes for half types).
  const Shape s = in.shape();
  const double m = in.m();
  const double partials = std::max(s.lg - 1, 0.0) * m;
  return message_cost(in, {s.lg, s.lg * m + in.extra_partial_bytes(partials), s.lg * m});
}

}  // namespace

const Algorithm rows::reduce_binomial{.name = "binomial",
                                      .description = "binomial tree towards the root",
                                      .collective = Collective::Reduce,
                                      .cost = cost,
                                      .run = runs<run>,
                                      .folding = Folding::Halves};

}  // namespace chorus::algorithms
