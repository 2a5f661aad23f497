// Recursive halving and doubling passes over the power-of-two core of a
// communicator, the building blocks of Rabenseifner's all-reduce and of the
// recursive-halving reduce-scatter.
//
// The data is `units` units of `unit` elements cut into p groups by
// patterns::block_of(units, p, g); a run of consecutive groups is one
// contiguous element range, so every message is one contiguous piece. The
// halving pass (patterns/recursive_halving.hpp) leaves core rank r with group r
// reduced over the core; the doubling pass swaps ever larger aligned windows
// (patterns/recursive_doubling.hpp) so every core rank ends with all groups.
//
// The halving pass keeps its partial results in algorithms/partials.hpp's partial type
// (fp32 for half types: they are rounded once, by the caller, after the last round).
#include "algorithms/patterns/recursive_halving.hpp"

#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

patterns::Block CoreGroups::span(int first, int groups) const {
  if (groups == 0) return {0, 0};
  auto head = patterns::block_of(units, parts, first);
  auto tail = patterns::block_of(units, parts, first + groups - 1);
  return {head.offset * unit, (tail.offset + tail.count - head.offset) * unit};
}

void halving_reduce_scatter_pass(const Call& args, const Context& ctx, const void* input,
                                 void* work, const CoreGroups& groups) {
  const int rank = ctx.rank();
  const DataType partial = partial_type(args);
  Scratch incoming(groups.span(0, groups.parts / 2).count, partial);
  RequestSet requests(args, ctx);
  // Round 0 from the unreduced input when there is one, in the caller's dtype.
  Operand current = input ? Operand{input, args.dtype} : Operand{work, partial};
  for (int round = 0; (groups.parts >> round) > 1; ++round) {
    auto step = patterns::recursive_halving_step(rank, groups.parts, round);
    auto kept = groups.span(step.keep_first, step.half);
    auto sent = groups.span(step.send_first, step.half);
    requests.exchange(step.partner, element_at(current.data, sent.offset, current.dtype),
                      bytes_of(sent.count, current.dtype), step.partner, incoming.data(),
                      bytes_of(kept.count, current.dtype));
    reduce_operands(element_at(work, kept.offset, partial), partial,
                    {element_at(current.data, kept.offset, current.dtype), current.dtype},
                    {incoming.data(), current.dtype}, kept.count, args.op);
    current = {work, partial};
  }
}

void doubling_allgather_pass(const Call& args, const Context& ctx, void* buffer,
                             const CoreGroups& groups) {
  const int rank = ctx.rank();
  RequestSet requests(args, ctx);
  for (int round = 0; (1 << round) < groups.parts; ++round) {
    int partner = patterns::recursive_doubling_partner(rank, round);
    auto mine = groups.span(patterns::recursive_doubling_group_start(rank, round), 1 << round);
    auto theirs = groups.span(patterns::recursive_doubling_group_start(partner, round), 1 << round);
    requests.exchange(
        partner, element_at(buffer, mine.offset, args.dtype), bytes_of(mine.count, args.dtype),
        partner, element_at(buffer, theirs.offset, args.dtype), bytes_of(theirs.count, args.dtype));
  }
}

}  // namespace chorus::algorithms
