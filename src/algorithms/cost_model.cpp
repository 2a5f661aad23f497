// The cost model's shared parts (cost_model.hpp): the shape arithmetic, the links, the
// helpers every algorithm's formula is built from, and the measured defaults.
//
// The formulas themselves live in the algorithms' rows. Their conventions: n ranks,
// m = selection_bytes, lg = ceil(log2 n), p = the largest power of two <= n, f = 1 when
// n != p. Terms count the critical path of one rank: rounds of latency, bytes that cross a
// link, bytes reduced or copied locally. Messages a rank posts at once overlap their
// latency (one round) but not their bytes. Local copies count with gamma, like reductions:
// both are one pass over memory.
#include "algorithms/cost_model.hpp"

#include "algorithms/patterns/binomial_tree.hpp"
#include "algorithms/patterns/knomial_tree.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace chorus::algorithms {

int Machine::max_ranks_per_host() const {
  if (topology.host_of_rank.empty()) return nranks;
  int most = 0;
  for (int host = 0; host < topology.num_hosts; ++host)
    most = std::max(most, topology.ranks_on_host(host));
  return most;
}

CostParameters CostParameters::defaults() {
  // Medians of three `chorusrun -n 4 chorus-perf --tune F` runs, with and
  // without CHORUS_TRANSPORT=tcp, on the development machine (2 cores, load
  // about 14): per-round latencies are those of ranks competing for cores.
  // Across hosts they rank the algorithms sensibly all the same: tcp costs more
  // than shm per round and per byte, and spread_cost charges the sharing of a
  // host's link, so large calls take the two-level forms or the ring. A tuning
  // file measured across the hosts (chorus-perf --tune) gives the real ratio.
  CostParameters c;
  c.shm = {110e-6, 1.0e-9};
  c.tcp = {160e-6, 4.5e-9};
  c.arena = {38e-6, 0.1e-9};
  c.gamma = 0.026e-9;
  return c;
}

Shape shape_of(int nranks) {
  auto u = static_cast<unsigned>(nranks);
  double p = static_cast<double>(std::bit_floor(u));
  double lg = nranks <= 1 ? 0 : static_cast<double>(std::bit_width(u - 1));
  return {static_cast<double>(nranks), lg, p, static_cast<double>(std::bit_width(u) - 1),
          p == nranks ? 0.0 : 1.0};
}

double CostInput::partial_scale() const {
  const bool half = dtype == DataType::Float16 || dtype == DataType::Bfloat16;
  return half && (op == ReduceOp::Sum || op == ReduceOp::Prod) ? 2.0 : 1.0;
}

const LinkCost& message_link(const CostInput& input) {
  const Machine& machine = input.machine;
  return machine.num_hosts() > 1 || !machine.local_shm ? input.parameters.tcp
                                                       : input.parameters.shm;
}

double terms_cost(const CostTerms& terms, const LinkCost& link, double gamma) {
  return link.time(terms.rounds, terms.bytes_moved) + terms.bytes_reduced * gamma;
}

double message_cost(const CostInput& input, const CostTerms& terms) {
  return terms_cost(terms, message_link(input), input.parameters.gamma);
}

double spread_cost(const CostInput& input, const CostTerms& terms) {
  const Machine& machine = input.machine;
  if (machine.num_hosts() <= 1 || machine.max_ranks_per_host() == 1) {
    return message_cost(input, terms);
  }
  const double n = machine.nranks;
  const double per_host = machine.max_ranks_per_host();
  const double crossing = (n - per_host) / (n - 1);
  const CostParameters& links = input.parameters;
  const LinkCost& inside = machine.local_shm ? links.shm : links.tcp;
  const double sharing = std::max(per_host / links.tcp_links, 1.0);
  const double beta = crossing * sharing * links.tcp.beta + (1 - crossing) * inside.beta;
  return terms_cost(terms, {links.tcp.alpha, beta}, links.gamma);
}

CostTerms knomial_terms(int ranks, double m, bool reduces) {
  double depth = patterns::knomial_depth(ranks, patterns::kDefaultRadix);
  double fan = std::min(patterns::kDefaultRadix - 1, std::max(ranks - 1, 0));
  return {depth, depth * fan * m, reduces ? depth * fan * m : 0};
}

CostTerms binomial_gather_scatter_terms(const CostInput& input) {
  const Shape s = input.shape();
  const double m = input.m();
  const Machine& machine = input.machine;
  if (machine.num_hosts() > 1 || machine.local_shm) return {s.lg, (s.n - 1) * m, s.n * m};
  double forwarded = 0;
  for (int r = 1; r < machine.nranks; ++r) {
    forwarded += patterns::binomial_subtree_size(r, 0, machine.nranks);
  }
  return {s.lg, forwarded * m, s.n * m};
}

double arena_cost(const CostInput& input, double syncs, double bytes, double reduced) {
  return input.parameters.arena.time(syncs, bytes) + reduced * input.parameters.gamma;
}

double cross_memory_cost(const CostInput& input, double syncs, double kernel_bytes,
                         double local_bytes, double reduced) {
  return arena_cost(input, syncs, local_bytes + kKernelCopyFactor * kernel_bytes, reduced);
}

}  // namespace chorus::algorithms
