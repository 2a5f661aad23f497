// Striped all-gather (two_level.hpp's Stripes), on H hosts of P ranks each: the striped
// reduce-scatter run backwards.
//
// Place i of every host owns stripe i: the blocks of the ranks of its column (place i on
// every host), host by host. (1) The H ranks of column i, one per host, all-gather their
// blocks (ring), which makes stripe i; (2) a ring all-gather of the stripes on each host
// gives every rank the whole striped buffer (stripe after stripe, Stripes::order), which it
// copies into `recv` in rank order.
//
// Each host's blocks cross the network once per other host, as in the leaders' form
// (hierarchical.cpp), but in P streams from P ranks at once, and every rank receives
// (P - 1)/P of the result inside its host where a leader sends all of it down a tree. Hosts
// of different sizes, one host or one rank per host have no columns to match: the call runs
// the leaders' form.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/two_level.hpp"

namespace chorus::algorithms {
namespace {

void run_stripes(const Call& args, const Context& ctx) {
  const Stripes stripes(ctx);
  const std::size_t total = static_cast<std::size_t>(ctx.size()) * args.count;
  const std::size_t stripe = static_cast<std::size_t>(stripes.num_hosts()) * args.count;
  Scratch striped(total, args.dtype);
  std::byte* own = striped.at(static_cast<std::size_t>(stripes.place()) * stripe);
  copy_elements(
      element_at(own, static_cast<std::size_t>(stripes.host_index()) * args.count, args.dtype),
      args.send, args.count, args.dtype);
  ring_allgather_pass(args, stripes.column(), own, stripe);
  ring_allgather_pass(args, stripes.host(), striped.data(), total);
  unpack_blocks(args.recv, striped.data(), stripes.order(), args.count, args.dtype);
}

const Algorithm* run(const Call& args, const Context& ctx) {
  return run_striped(run_stripes, rows::allgather_hierarchical, args, ctx);
}

// A ring all-gather of m per rank in each column, a ring all-gather of H m per rank on each
// host, the result copied into rank order.
double cost(const CostInput& in) {
  return stripes_cost(in, rows::allgather_ring, rows::allgather_ring);
}

}  // namespace

const Algorithm rows::allgather_striped{
    .name = "striped",
    .description =
        "on hosts of equal size: ring all-gather of each place's stripe among that place's "
        "ranks across hosts, ring all-gather of the stripes on each host",
    .collective = Collective::AllGather,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
