// Pairwise-exchange all-to-all-v: the all-to-all schedule with per-peer
// counts and displacements (in elements).
//
// At step k in [1, n) rank r sends send_counts[r + k] elements from
// send_displs[r + k] and receives recv_counts[r - k] elements at
// recv_displs[r - k] (patterns/pairwise.hpp). Blocks of zero elements still
// travel as empty messages: a peer that disagrees about a count then fails
// with a mismatch instead of pairing later messages wrongly.
//
// With send == recv the input is snapshotted first (its extent is the largest
// send_displs[p] + send_counts[p]), so receives cannot overwrite unsent data.
#include "algorithms/patterns/pairwise.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  Scratch snapshot;
  const void* source = alltoallv_input(args, &snapshot);
  copy_alltoallv_self_block(args, rank, source);
  RequestSet requests(args, ctx);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    auto to = static_cast<std::size_t>(peers.send_to);
    auto from = static_cast<std::size_t>(peers.recv_from);
    requests.exchange(peers.send_to, element_at(source, args.send_displs[to], args.dtype),
                      bytes_of(args.send_counts[to], args.dtype), peers.recv_from,
                      element_at(args.recv, args.recv_displs[from], args.dtype),
                      bytes_of(args.recv_counts[from], args.dtype));
  }
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return spread_cost(in, {s.n - 1, (s.n - 1) * m, m});
}

}  // namespace

const Algorithm rows::alltoallv_pairwise{
    .name = "pairwise",
    .description = "n - 1 steps: send to r + k, receive from r - k",
    .collective = Collective::AllToAllV,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
