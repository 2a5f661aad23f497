// Cost formulas per algorithm (cost_model.hpp).
//
// Notation: n ranks, m = selection_bytes (the buffer for all-reduce, broadcast
// and reduce; one rank's block for all-gather, reduce-scatter, gather and
// scatter; one peer's block for all-to-all), lg = ceil(log2 n), p = the
// largest power of two <= n, f = 1 when n != p (extra ranks fold in and out).
// Terms count the critical path of one rank: rounds of latency, bytes that
// cross a link, bytes reduced or copied locally. Messages a rank posts at once
// overlap their latency (one round) but not their bytes. Local copies count
// with gamma, like reductions: both are one pass over memory.
#include "algorithms/cost_model.hpp"

#include "algorithms/patterns/binomial_tree.hpp"
#include "algorithms/patterns/knomial_tree.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

namespace chorus::algorithms {
namespace {

using C = Collective;

struct Shape {
  double n, lg, p, log2p, f;
};

Shape shape_of(int nranks) {
  auto u = static_cast<unsigned>(nranks);
  double p = static_cast<double>(std::bit_floor(u));
  double lg = nranks <= 1 ? 0 : static_cast<double>(std::bit_width(u - 1));
  return {static_cast<double>(nranks), lg, p, static_cast<double>(std::bit_width(u) - 1),
          static_cast<double>(std::bit_floor(u)) == nranks ? 0.0 : 1.0};
}

// A radix-k tree over `ranks` ranks: depth levels, up to k - 1 children each.
CostTerms knomial_terms(int ranks, double m, bool reduces) {
  double depth = patterns::knomial_depth(ranks, patterns::kDefaultRadix);
  double fan = std::min(patterns::kDefaultRadix - 1, std::max(ranks - 1, 0));
  return {depth, depth * fan * m, reduces ? depth * fan * m : 0};
}

CostTerms allreduce_terms(std::string_view name, const Shape& s, double m) {
  if (name == "ring") return {2 * (s.n - 1), 2 * (s.n - 1) / s.n * m, (s.n - 1) / s.n * m};
  if (name == "recursive_doubling") {
    return {s.log2p + 2 * s.f, (s.log2p + 2 * s.f) * m, (s.log2p + s.f) * m};
  }
  if (name == "rabenseifner") {
    double half = (s.p - 1) / s.p * m;
    return {2 * s.log2p + 2 * s.f, 2 * half + 2 * s.f * m, half + s.f * m};
  }
  if (name == "reduce_broadcast") return {2 * s.lg, 2 * s.lg * m, s.lg * m};
  return {-1, 0, 0};
}

CostTerms rooted_terms(std::string_view name, Collective collective, const Shape& s, double m,
                       int nranks) {
  bool reduces = collective == C::Reduce;
  if (name == "binomial") {
    if (collective == C::Gather || collective == C::Scatter) return {s.lg, (s.n - 1) * m, s.n * m};
    return {s.lg, s.lg * m, reduces ? s.lg * m : 0};
  }
  if (name == "knomial") return knomial_terms(nranks, m, reduces);
  if (name == "linear") return {s.n - 1, (s.n - 1) * m, m};
  return {-1, 0, 0};
}

CostTerms block_terms(std::string_view name, Collective collective, const Shape& s, double m) {
  double others = (s.n - 1) * m;
  if (collective == C::AllGather) {
    if (name == "ring") return {s.n - 1, others, m};
    if (name == "recursive_doubling") return {s.log2p, others, m};
    if (name == "bruck") return {s.lg, others, 2 * s.n * m};
  }
  if (collective == C::ReduceScatter) {
    if (name == "ring" || name == "pairwise") return {s.n - 1, others, others};
    if (name == "recursive_halving") {
      double total = s.n * m;
      double half = (s.p - 1) / s.p * total;
      return {s.log2p + 2 * s.f, half + s.f * (total + m), half + (1 + s.f) * total};
    }
  }
  if (collective == C::AllToAll || collective == C::AllToAllV) {
    if (name == "pairwise") return {s.n - 1, others, m};
    if (name == "bruck") return {s.lg, s.lg * s.n / 2 * m, (s.lg * s.n + 2 * s.n) * m};
  }
  if (collective == C::Barrier && name == "dissemination") return {s.lg, 0, 0};
  return {-1, 0, 0};
}

// shm_direct: each rank writes its input to the arena and reads what it needs
// back, with two arena synchronisations (one for the barrier).
double arena_cost(Collective collective, const Shape& s, double m, const CostParameters& c) {
  double moved = 0, reduced = 0, syncs = 2;
  switch (collective) {
    case C::AllReduce:
      moved = 3 * m;
      reduced = (s.n - 1) / s.n * m;
      break;
    case C::Broadcast:
      moved = 2 * m;
      break;
    case C::Reduce:
      moved = 2 * m + m / s.n;
      reduced = (s.n - 1) / s.n * m;
      break;
    case C::ReduceScatter:
      moved = 2 * s.n * m;
      reduced = (s.n - 1) * m;
      break;
    case C::AllGather:
    case C::Gather:
    case C::Scatter:
      moved = (s.n + 1) * m;
      break;
    case C::AllToAll:
    case C::AllToAllV:
      moved = (2 * s.n - 1) * m;  // n - 1 blocks in and out, the own one straight across
      break;
    case C::Barrier:
      syncs = 1;
      break;
    default:
      return std::numeric_limits<double>::infinity();
  }
  return c.arena.time(syncs, moved) + reduced * c.gamma;
}

// cma: the cards and phase flags are arena synchronisations; each byte is
// copied once, by the kernel (a cross-memory read), which pins the peer's pages one
// by one. That copy costs kKernelCopyFactor arena bytes: measured on the
// development machine (a PVM guest, where pinning is slow) at 64 MiB, 3.5-4 GB/s
// against memcpy's 18 GB/s; on bare metal it is closer to 1. All-reduce: cards,
// "slice final", "all read"; (n - 1)/n of the message read twice, 1/n reduced.
// All-gather, all-to-all, gather, scatter: cards, "all read"; n - 1 blocks read (scatter:
// one by each other rank, at once, but through the host's one memory and, when ranks
// outnumber cores, on shared cores), the own one copied.
constexpr double kKernelCopyFactor = 5.0;

double cma_cost(Collective collective, const Shape& s, double m, const CostParameters& c) {
  double syncs = 2, kernel = 0, local = 0, reduced = 0;
  switch (collective) {
    case C::AllReduce:
      syncs = 3;
      kernel = 2 * (s.n - 1) / s.n * m;
      reduced = (s.n - 1) / s.n * m;
      break;
    case C::Broadcast:
      kernel = m;
      break;
    case C::AllGather:
    case C::AllToAll:
    case C::Gather:   // the root reads n - 1 blocks in turn
    case C::Scatter:  // n - 1 ranks read a block of the root's buffer, sharing the host
      kernel = (s.n - 1) * m;
      local = m;
      break;
    default:
      return std::numeric_limits<double>::infinity();
  }
  return c.arena.time(syncs, local + kKernelCopyFactor * kernel) + reduced * c.gamma;
}

// shm_window: the cards and "done" are arena synchronisations, and bytes go straight
// between the ranks' buffers. All-reduce: each rank reads the message once (its slice of
// every input) and writes it once (its slice of every output). Reduce-scatter (m a block):
// n blocks read, one written. All-gather: n blocks copied.
double window_cost(Collective collective, const Shape& s, double m, const CostParameters& c) {
  switch (collective) {
    case C::AllReduce:
      return c.arena.time(2, 2 * m) + (s.n - 1) / s.n * m * c.gamma;
    case C::ReduceScatter:
      return c.arena.time(2, (s.n + 1) / 2 * m) + (s.n - 1) * m * c.gamma;
    case C::AllGather:
      return c.arena.time(2, s.n * m);
    default:
      return std::numeric_limits<double>::infinity();
  }
}

double terms_cost(const CostTerms& t, const LinkCost& link, double gamma) {
  if (t.rounds < 0) return std::numeric_limits<double>::infinity();
  return link.time(t.rounds, t.bytes_moved) + t.bytes_reduced * gamma;
}

// Within each host (knomial reduce, then broadcast), the leaders over tcp.
double hierarchical_cost(double m, const Machine& machine, const CostParameters& c) {
  const LinkCost& local = machine.local_shm ? c.shm : c.tcp;
  int per_host = machine.max_ranks_per_host();
  int hosts = machine.num_hosts();
  // One host, or one rank per host: it degenerates to a flat algorithm; leave those to them.
  if (hosts <= 1 || per_host <= 1) return std::numeric_limits<double>::infinity();
  double cost = terms_cost(knomial_terms(per_host, m, true), local, c.gamma) +
                terms_cost(knomial_terms(per_host, m, false), local, c.gamma);
  // The leaders' algorithm as allreduce/hierarchical.cpp picks it.
  std::string_view large =
      std::has_single_bit(static_cast<unsigned>(hosts)) ? "rabenseifner" : "ring";
  auto leader = allreduce_terms(m < 64 * 1024 ? "recursive_doubling" : large, shape_of(hosts), m);
  return cost + terms_cost(leader, c.tcp, c.gamma);
}

// TCP on one host (CHORUS_TRANSPORT=tcp): every byte any rank sends costs the shared cores a
// kernel copy at each end, so a tree that forwards blocks through intermediate ranks pays for
// all it forwards, not only for the bytes on the root's link. Binomial gather and scatter move
// each block once per tree level above it: sum of subtree sizes (n/2 log2 n for n = 2^k)
// blocks in all, against n - 1 for linear. Measured at 4 ranks from 1 MiB: linear 1.5-2x
// faster. nullopt for the other algorithms (the usual critical-path terms).
std::optional<CostTerms> loopback_tcp_gather_scatter(std::string_view name, Collective collective,
                                                     const Shape& s, double m, int nranks) {
  if ((collective != C::Gather && collective != C::Scatter) || name != "binomial") {
    return std::nullopt;
  }
  double forwarded = 0;
  for (int r = 1; r < nranks; ++r) forwarded += patterns::binomial_subtree_size(r, 0, nranks);
  return CostTerms{s.lg, forwarded * m, s.n * m};
}

}  // namespace

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
  CostParameters c;
  c.shm = {110e-6, 1.0e-9};
  c.tcp = {160e-6, 4.5e-9};
  c.arena = {38e-6, 0.1e-9};
  c.gamma = 0.026e-9;
  return c;
}

double modelled_cost(std::string_view name, Collective collective, std::size_t bytes,
                     const Machine& machine, const CostParameters& parameters,
                     std::size_t chunk_bytes) {
  const Shape s = shape_of(machine.nranks);
  const double m = static_cast<double>(bytes);
  if (name == "shm_direct") return arena_cost(collective, s, m, parameters);
  if (name == "cma") return cma_cost(collective, s, m, parameters);
  if (name == "shm_window") return window_cost(collective, s, m, parameters);
  if (collective == C::AllReduce && name == "hierarchical") {
    return hierarchical_cost(m, machine, parameters);
  }
  const LinkCost& link =
      machine.num_hosts() > 1 || !machine.local_shm ? parameters.tcp : parameters.shm;
  if (collective == C::Broadcast && name == "ring") {
    // k chunks of c bytes: n - 2 + k chunk steps (the last rank has all after them).
    double c = chunk_bytes ? static_cast<double>(chunk_bytes) : std::max(m / 8, 1024.0);
    double steps = std::max(s.n - 2, 0.0) + std::ceil(std::max(m, 1.0) / c);
    return link.time(steps, steps * std::min(c, m));
  }
  if (machine.num_hosts() == 1 && !machine.local_shm) {
    if (auto volume = loopback_tcp_gather_scatter(name, collective, s, m, machine.nranks)) {
      return terms_cost(*volume, link, parameters.gamma);
    }
  }
  CostTerms terms = collective == C::AllReduce ? allreduce_terms(name, s, m)
                    : (collective == C::Broadcast || collective == C::Reduce ||
                       collective == C::Gather || collective == C::Scatter)
                        ? rooted_terms(name, collective, s, m, machine.nranks)
                        : block_terms(name, collective, s, m);
  return terms_cost(terms, link, parameters.gamma);
}

std::size_t modelled_chunk_bytes(std::string_view name, Collective collective, std::size_t bytes,
                                 const Machine& machine, const CostParameters& parameters) {
  if (collective != C::Broadcast || name != "ring") return 0;
  const LinkCost& link =
      machine.num_hosts() > 1 || !machine.local_shm ? parameters.tcp : parameters.shm;
  double hops = std::max(machine.nranks - 2, 1);
  double best = std::sqrt(static_cast<double>(bytes) * link.alpha / (hops * link.beta));
  return static_cast<std::size_t>(std::clamp(best, 4096.0, 4.0 * 1024 * 1024));
}

}  // namespace chorus::algorithms
