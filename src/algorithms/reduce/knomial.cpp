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
//
// Half types: leaves send their input in the half type, every other rank its partial result
// in fp32 (algorithms/partials.hpp); the root rounds once, when it folds in its last child.
#include "algorithms/patterns/knomial_tree.hpp"

#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "core/reduce.hpp"

#include <vector>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const int radix = patterns::kDefaultRadix;
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  const int parent = patterns::knomial_parent(rank, args.root, n, radix);
  auto children = patterns::knomial_children(rank, args.root, n, radix);
  RequestSet requests(args, ctx);
  // What a rank sends up: a leaf its input, any other rank a partial result.
  auto sent_type = [&](int r) {
    return patterns::knomial_children(r, args.root, n, radix).empty() ? args.dtype : partial;
  };
  Operand result{args.send, args.dtype};
  Scratch partial_sum, incoming;
  std::vector<transport::RequestId> ids;
  // The root's running result is recv itself when partials have the caller's dtype.
  const bool in_recv = parent < 0 && partial == args.dtype;
  if (!children.empty()) {
    partial_sum = in_recv ? Scratch() : Scratch(args.count, partial);
    incoming = Scratch(children.size() * args.count, partial);
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    ids.push_back(requests.recv(children[i], incoming.at(i * args.count),
                                bytes_of(args.count, sent_type(children[i]))));
  }
  void* accumulator = in_recv ? args.recv : partial_sum.data();
  for (std::size_t i = 0; i < children.size(); ++i) {
    requests.wait_for(ids[i]);
    const Operand theirs{incoming.at(i * args.count), sent_type(children[i])};
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
  // Of the messages to a parent, the deepest level's come from leaves (unreduced input); the
  // others carry partial results (twice the bytes for half types).
  CostTerms terms = knomial_terms(in.machine.nranks, in.m(), true);
  if (terms.rounds > 1) {
    const double partials = terms.bytes_moved / terms.rounds * (terms.rounds - 1);
    terms.bytes_moved += in.extra_partial_bytes(partials);
  }
  return message_cost(in, terms);
}

}  // namespace

const Algorithm rows::reduce_knomial{
    .name = "knomial",
    .description = "radix-4 tree towards the root, children received at once",
    .collective = Collective::Reduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
