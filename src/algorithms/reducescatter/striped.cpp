// Striped reduce-scatter (two_level.hpp's Stripes), on H hosts of P ranks each.
//
// Place i of every host owns stripe i: the blocks of the ranks of its column (place i on
// every host), host by host. (1) Every rank copies its input into a striped buffer (stripe
// after stripe, Stripes::order), and a ring reduce-scatter on each host leaves place i its
// host's sum of stripe i. (2) The H ranks of column i, one per host, reduce-scatter that
// stripe among themselves (pairwise: each block goes straight to its owner, which folds the
// H - 1 it receives into its own), so rank r's block lands on r summed over every host.
//
// Each host's data crosses the network once, as in the leaders' form (hierarchical.cpp), but
// in P streams from P ranks at once, and every rank moves (P - 1)/P of the input inside its
// host where a leader receives and reduces all of it. Hosts of different sizes, one host or
// one rank per host have no columns to match: the call runs the leaders' form.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

namespace chorus::algorithms {
namespace {

void run_stripes(const Call& args, const Context& ctx) {
  const Stripes stripes(ctx);
  const std::size_t total = static_cast<std::size_t>(ctx.size()) * args.count;
  const std::size_t stripe = static_cast<std::size_t>(stripes.num_hosts()) * args.count;
  // In place the input holds the result's block: read it all before the result is written.
  Scratch striped(total, args.dtype);
  pack_blocks(striped.data(), args.send, stripes.order(), args.count, args.dtype);
  std::byte* own = striped.at(static_cast<std::size_t>(stripes.place()) * stripe);
  ring_reduce_scatter_pass(args, stripes.host(), striped.data(), total, own);
  pairwise_reduce_scatter_pass(args, stripes.column(), own, stripe, args.recv);
}

const Algorithm* run(const Call& args, const Context& ctx) {
  return run_striped(run_stripes, rows::reduce_scatter_hierarchical, args, ctx);
}

// The input copied into stripe order, a ring reduce-scatter of H m per rank on each host, a
// pairwise reduce-scatter of m per rank in each column.
double cost(const CostInput& in) {
  return stripes_cost(in, rows::reduce_scatter_ring, rows::reduce_scatter_pairwise);
}

}  // namespace

const Algorithm rows::reduce_scatter_striped{
    .name = "striped",
    .description =
        "on hosts of equal size: ring reduce-scatter of each place's stripe on each host, "
        "pairwise reduce-scatter of it among that place's ranks across hosts",
    .collective = Collective::ReduceScatter,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
