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
#include "algorithms/patterns/recursive_halving.hpp"

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
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

void halving_reduce_scatter_pass(transport::Transport& transport, const CollectiveArgs& args,
                                 void* buffer, const CoreGroups& groups) {
  const int rank = transport.rank();
  const DataType dtype = args.dtype;
  Scratch incoming(groups.span(0, groups.parts / 2).count, dtype);
  RequestSet requests(transport, args);
  for (int round = 0; (groups.parts >> round) > 1; ++round) {
    auto step = patterns::recursive_halving_step(rank, groups.parts, round);
    auto kept = groups.span(step.keep_first, step.half);
    auto sent = groups.span(step.send_first, step.half);
    requests.exchange(step.partner, element_at(buffer, sent.offset, dtype),
                      bytes_of(sent.count, dtype), step.partner, incoming.data(),
                      bytes_of(kept.count, dtype));
    void* mine = element_at(buffer, kept.offset, dtype);
    reduce_into(mine, mine, incoming.data(), kept.count, dtype, args.op);
  }
}

void doubling_allgather_pass(transport::Transport& transport, const CollectiveArgs& args,
                             void* buffer, const CoreGroups& groups) {
  const int rank = transport.rank();
  RequestSet requests(transport, args);
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
