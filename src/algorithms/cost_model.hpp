// The alpha-beta-gamma cost model behind the default algorithm choice.
//
// A message of b bytes over a link costs alpha + b * beta; reducing (or
// copying) b bytes locally costs b * gamma. An algorithm's modelled time is
//   rounds * alpha + bytes_moved * beta + bytes_reduced * gamma
// along its critical path, with each algorithm's formula in its own row
// (Algorithm::cost, in the algorithm's file, built from the helpers below)
// and the link parameters per transport kind: shm rings between ranks of one
// host, tcp between hosts (or everywhere under CHORUS_TRANSPORT=tcp), and the
// per-host arena of the shm_direct algorithms. Defaults were measured on the
// development machine with `chorus-perf --tune`; CHORUS_TUNING_FILE replaces
// them with a file that command writes (format: write_tuning / read_tuning).
#pragma once

#include "core/collective.hpp"
#include "core/topology.hpp"

#include <chorus/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace chorus::algorithms {

/// One kind of link: alpha in seconds per message, beta in seconds per byte.
struct LinkCost {
  double alpha = 0;
  double beta = 0;
  double time(double messages, double bytes) const { return messages * alpha + bytes * beta; }
  bool operator==(const LinkCost&) const = default;
};

struct CostParameters {
  LinkCost shm;      ///< shared-memory rings between ranks of one host
  LinkCost tcp;      ///< sockets (between hosts, or all links under CHORUS_TRANSPORT=tcp)
  LinkCost arena;    ///< one synchronisation and one byte copied through the host arena
  double gamma = 0;  ///< seconds per byte reduced (or copied) locally
  /// Network ports per host that its ranks use at once (a cluster with one port per
  /// accelerator has as many as ranks per host): spread_cost shares a host's tcp links among
  /// its ranks only when they outnumber them.
  double tcp_links = 1;

  /// The measured defaults (see cost_model.cpp for how).
  static CostParameters defaults();
  bool operator==(const CostParameters&) const = default;
};

/// What the model knows about a communicator besides the call.
struct Machine {
  int nranks = 1;
  Topology topology;      ///< empty host_of_rank: every rank on one host
  bool local_shm = true;  ///< ranks of one host talk over shm rings (else tcp)
  int num_hosts() const { return topology.host_of_rank.empty() ? 1 : topology.num_hosts; }
  int max_ranks_per_host() const;
};

/// One algorithm's terms along its critical path.
struct CostTerms {
  double rounds = 0;
  double bytes_moved = 0;
  double bytes_reduced = 0;
};

/// The rank arithmetic of the formulas: n ranks, lg = ceil(log2 n), p = the largest power
/// of two <= n, log2p = log2 p, f = 1 when n != p (extra ranks fold in and out).
struct Shape {
  double n, lg, p, log2p, f;
};
Shape shape_of(int nranks);

/// What a cost function sees of a call: its collective, `bytes` as selection_bytes defines
/// them (the buffer for all-reduce, broadcast and reduce; one rank's block for all-gather,
/// reduce-scatter, gather and scatter; one peer's block for all-to-all), its dtype and op,
/// the machine and its parameters, and the pipeline chunk of chunked algorithms.
struct CostInput {
  Collective collective = Collective::Barrier;
  std::size_t bytes = 0;
  DataType dtype = DataType::Uint8;
  ReduceOp op = ReduceOp::Sum;
  const Machine& machine;
  const CostParameters& parameters;
  std::size_t chunk_bytes = 0;

  double m() const { return static_cast<double>(bytes); }
  Shape shape() const { return shape_of(machine.nranks); }
  /// Bytes a partial result takes per byte of the caller's dtype: 2 where a reduction of
  /// float16/bfloat16 carries its partial results in fp32 (algorithms/partials.hpp), else 1.
  double partial_scale() const;
  /// What `partial_bytes` of partial results cost beyond their count in the caller's dtype:
  /// (partial_scale() - 1) x partial_bytes, 0 unless they travel in fp32.
  double extra_partial_bytes(double partial_bytes) const {
    return (partial_scale() - 1) * partial_bytes;
  }
};

/// Modelled seconds of one algorithm for a call (Algorithm::cost); infinity rules it out.
using CostFunction = double (*)(const CostInput& input);

/// The link of the message-passing algorithms: tcp across hosts or under
/// CHORUS_TRANSPORT=tcp, the shm rings otherwise.
const LinkCost& message_link(const CostInput& input);
/// rounds * alpha + bytes_moved * beta + bytes_reduced * gamma on `link`.
double terms_cost(const CostTerms& terms, const LinkCost& link, double gamma);
/// terms_cost on message_link.
double message_cost(const CostInput& input, const CostTerms& terms);
/// message_cost of an algorithm whose ranks all exchange at once, each spreading its bytes
/// evenly over partners all across the communicator (recursive doubling and halving, Bruck,
/// pairwise exchange). Across hosts (P ranks on the fullest one, blocks of a host's ranks
/// or not) a share (n - P)/(n - 1) of each rank's bytes leaves its host, and the P ranks of
/// a host push theirs through the host's L tcp links (tcp_links) at the same time: those
/// bytes cost max(P / L, 1) tcp betas, the rest the links inside the host; every round
/// costs tcp's alpha. With P <= L or one host this is message_cost. (The ring and the trees are not
/// spread: along a ring of blocks of hosts' ranks one rank per host sends across.)
double spread_cost(const CostInput& input, const CostTerms& terms);
/// A radix-k tree (patterns/knomial_tree.hpp) over `ranks` ranks: depth levels, up to k - 1
/// children each; `reduces`: every received byte is reduced too.
CostTerms knomial_terms(int ranks, double m, bool reduces);
/// A binomial gather or scatter (the root's link carries the n - 1 blocks). TCP on one host
/// (CHORUS_TRANSPORT=tcp): every byte any rank sends costs the shared cores a kernel copy at
/// each end, so a tree that forwards blocks through intermediate ranks pays for all it
/// forwards: the sum of the subtree sizes (n/2 log2 n for n = 2^k) blocks in all, against
/// n - 1 for linear (measured at 4 ranks from 1 MiB: linear 1.5-2x faster).
CostTerms binomial_gather_scatter_terms(const CostInput& input);
/// An algorithm in the host arena: `syncs` arena synchronisations, `bytes` copied through
/// it, `reduced` bytes reduced locally.
double arena_cost(const CostInput& input, double syncs, double bytes, double reduced = 0);
/// An algorithm of cross-memory reads: arena synchronisations, `kernel_bytes` read from peers
/// by the kernel (each costing kKernelCopyFactor arena bytes: it pins the peer's pages one by
/// one), `local_bytes` copied, `reduced` bytes reduced.
double cross_memory_cost(const CostInput& input, double syncs, double kernel_bytes,
                         double local_bytes, double reduced = 0);
/// Measured on the development machine (a PVM guest, where pinning is slow) at 64 MiB:
/// cross-memory reads at 3.5-4 GB/s against memcpy's 18 GB/s; on bare metal closer to 1.
inline constexpr double kKernelCopyFactor = 5.0;

/// The keys of a tuning file, in the order write_tuning writes them.
enum class TuningKey : std::uint8_t {
  ShmAlpha,
  ShmBeta,
  TcpAlpha,
  TcpBeta,
  ArenaAlpha,
  ArenaBeta,
  Gamma,
  TcpLinks
};
inline constexpr int kNumTuningKeys = 8;
/// "shm.alpha_us", "shm.beta_ns_per_byte", ..., "gamma_ns_per_byte", "tcp.links_per_host".
std::string_view to_string(TuningKey key);

/// Where a tuning value came from. Measured: by chorus-perf --tune. Assumed: written without
/// measuring (the built-in default, or a value kept from an earlier file). Unmarked: read from
/// a line that says neither (files written before the marks). Default: the file has no line
/// for it, so the built-in default applies.
enum class TuningMark : std::uint8_t { Default, Unmarked, Assumed, Measured };
std::string_view to_string(TuningMark mark);

/// The parameters a tuning file gives, and where each came from (indexed by TuningKey).
struct Tuning {
  CostParameters parameters = CostParameters::defaults();
  std::array<TuningMark, kNumTuningKeys> marks{};
  TuningMark& mark(TuningKey key) { return marks[static_cast<std::size_t>(key)]; }
  TuningMark mark(TuningKey key) const { return marks[static_cast<std::size_t>(key)]; }
};

/// Tuning file: '#' comments and lines "key value # mark" with the TuningKey names; the
/// trailing comment "# measured ..." or "# assumed ..." is the mark (any other comment, or
/// none, reads as Unmarked, so files written before the marks still read). Keys left out
/// keep the defaults. write_tuning writes every key, marked measured or assumed.
void write_tuning(std::ostream& out, const Tuning& tuning);
/// Throws Error(InvalidArgument) naming the line for an unknown key or a bad value.
Tuning read_tuning(std::istream& in, std::string_view source);
/// The parameters of the file at `path`; defaults() for an empty path. The first time a
/// path is read in the process, logs at INFO what the file set and how each was marked.
CostParameters load_tuning_file(const std::string& path);

}  // namespace chorus::algorithms
