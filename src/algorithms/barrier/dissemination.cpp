// Dissemination barrier.
//
// ceil(log2 n) rounds; in round k every rank sends an empty message to
// rank + 2^k and waits for the one from rank - 2^k (patterns/dissemination.hpp).
// A rank leaves only after hearing, directly or transitively, from every other
// rank, and every rank's first message is sent on entry, so no rank leaves
// before all have entered. The distances 2^k < n are distinct, so no ordered
// pair carries two messages of one barrier.
#include "algorithms/patterns/dissemination.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  RequestSet requests(args, ctx);
  for (int round = 0; round < patterns::dissemination_rounds(n); ++round) {
    auto peers = patterns::dissemination_partners(ctx.rank(), n, round);
    requests.exchange(peers.send_to, nullptr, 0, peers.recv_from, nullptr, 0);
  }
}

double cost(const CostInput& in) { return message_cost(in, {in.shape().lg, 0, 0}); }

}  // namespace

const Algorithm rows::barrier_dissemination{
    .name = "dissemination",
    .description = "ceil(log2 n) rounds of empty messages to r + 2^k",
    .collective = Collective::Barrier,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
