// The alpha-beta-gamma cost model behind the default algorithm choice.
//
// A message of b bytes over a link costs alpha + b * beta; reducing (or
// copying) b bytes locally costs b * gamma. An algorithm's modelled time is
//   rounds * alpha + bytes_moved * beta + bytes_reduced * gamma
// along its critical path, with the formulas per algorithm in cost_model.cpp
// and the link parameters per transport kind: shm rings between ranks of one
// host, tcp between hosts (or everywhere under CHORUS_TRANSPORT=tcp), and the
// per-host arena of the shm_direct algorithms. Defaults were measured on the
// development machine with `chorus-perf --tune`; CHORUS_TUNING_FILE replaces
// them with a file that command writes (format: write_tuning / read_tuning).
#pragma once

#include "core/collective.hpp"
#include "core/topology.hpp"

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

/// One algorithm's terms, for tests and for chorus-perf's report.
struct CostTerms {
  double rounds = 0;
  double bytes_moved = 0;
  double bytes_reduced = 0;
};

/// Modelled seconds of `name` for (`collective`, `bytes` as selection_bytes
/// defines them) on `machine`; infinity for an algorithm the model does not
/// know. `chunk_bytes` is the pipeline chunk of chunked algorithms.
double modelled_cost(std::string_view name, Collective collective, std::size_t bytes,
                     const Machine& machine, const CostParameters& parameters,
                     std::size_t chunk_bytes = 0);

/// The chunk that minimises the pipelined broadcast's modelled time,
/// c = sqrt(bytes * alpha / ((n - 2) * beta)) clamped to [4 KiB, 4 MiB]; 0 when
/// the collective/algorithm has no chunk.
std::size_t modelled_chunk_bytes(std::string_view name, Collective collective, std::size_t bytes,
                                 const Machine& machine, const CostParameters& parameters);

/// The keys of a tuning file, in the order write_tuning writes them.
enum class TuningKey : std::uint8_t {
  ShmAlpha,
  ShmBeta,
  TcpAlpha,
  TcpBeta,
  ArenaAlpha,
  ArenaBeta,
  Gamma
};
inline constexpr int kNumTuningKeys = 7;
/// "shm.alpha_us", "shm.beta_ns_per_byte", ..., "gamma_ns_per_byte".
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
