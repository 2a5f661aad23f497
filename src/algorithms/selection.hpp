// The parts of algorithm selection that select_algorithm (algorithm.hpp) is
// built from, public so the communicator can check CHORUS_ALGO once at start-up
// and tests can check each rule.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_model.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::algorithms {

/// One entry of CHORUS_ALGO: `name` for `collective`, or for every collective
/// that has an algorithm of that name when `collective` is empty (a bare name).
struct AlgorithmOverride {
  std::optional<Collective> collective;
  std::string name;
};

/// Parses CHORUS_ALGO: entries separated by commas, each "name" or
/// "collective=name", spaces around either ignored, empty entries skipped.
/// Throws Error(InvalidArgument) naming the entry when a collective is unknown,
/// a name is empty, or a name matches no registered algorithm (of that
/// collective, or of any collective for a bare name).
std::vector<AlgorithmOverride> parse_algorithm_override(std::string_view spec);

/// The name the overrides ask for `collective`, or "" when none does. An entry
/// naming the collective beats a bare name; among equals the last one wins.
/// Bare names only count for collectives that have an algorithm of that name.
std::string_view requested_algorithm(const std::vector<AlgorithmOverride>& overrides,
                                     Collective collective);

/// Whether `algorithm` takes the case: the context provides what it needs, and its
/// accepts() (if any) takes the call's shape.
bool algorithm_accepts(const Algorithm& algorithm, const Call& args, int nranks, Needs provided);

/// Bytes that drive the default choice: args.count elements of args.dtype
/// (per rank for all-gather/gather, per peer for all-to-all; 0 for barrier and
/// all-to-all-v).
std::size_t selection_bytes(const Call& args);

/// What selection knows about the communicator besides the call: its shape
/// (ranks, hosts, link kinds) and the cost-model parameters. The same on every
/// rank (the topology is exchanged at connect, the tuning file is per job).
struct SelectionContext {
  Machine machine;
  CostParameters parameters = CostParameters::defaults();
};

/// A choice: the algorithm, its pipeline chunk (0: none or its own default),
/// and its modelled time.
struct Selection {
  const Algorithm* algorithm = nullptr;
  std::size_t chunk_bytes = 0;
  double modelled_seconds = 0;
};

/// A one-host context of `nranks` ranks over shm rings with the default parameters.
SelectionContext single_host_context(int nranks);

/// `algorithm` with its modelled chunk and time for the call.
Selection evaluate(const Algorithm& algorithm, const Call& args, const SelectionContext& context);

/// Among the registered algorithms of args.collective that accept the case
/// (`provided`: what the communicator's Context offers), the one of lowest modelled cost
/// (Algorithm::cost); ties go to the first registered. Throws Error(InvalidUsage) for send
/// and recv, which have no algorithms, and Error(InternalError) if none accepts.
Selection default_selection(const Call& args, Needs provided, const SelectionContext& context);

/// The override's algorithm when CHORUS_ALGO names one for the collective and
/// it accepts the case, else default_selection. Pure.
Selection select(const Call& args, Needs provided, const SelectionContext& context,
                 const std::vector<AlgorithmOverride>& overrides);

/// Why select() chooses what it does, for the INFO log: the modelled time of every algorithm
/// of args.collective that accepts the case, fastest first, the ones that decline it, and
/// the CHORUS_ALGO entry that applies, e.g. "CHORUS_ALGO asks for ring; modelled: ring 95.3
/// us, recursive_doubling 402 us; declined by hierarchical".
std::string explain_selection(const Call& args, Needs provided, const SelectionContext& context,
                              const std::vector<AlgorithmOverride>& overrides);

/// The algorithm select() picks on a one-host context of `nranks` ranks over shm rings with
/// the default parameters, for CHORUS_ALGO `override_spec` (see parse_algorithm_override).
const Algorithm& select_algorithm(const Call& args, int nranks, Needs provided,
                                  std::string_view override_spec = {});

/// select() for one communicator (one context, one set of overrides), remembered:
/// a choice depends on the call only through the collective, selection_bytes(), the dtype
/// and op (cost terms of half types), and what the context provides, so calls that repeat
/// those skip the cost model. Direct-mapped, 64 entries; not thread-safe (the
/// communicator runs one collective at a time).
class SelectionCache {
 public:
  const Selection& select(const Call& args, Needs provided, const SelectionContext& context,
                          const std::vector<AlgorithmOverride>& overrides);

 private:
  struct Entry {
    bool used = false;
    Collective collective = Collective::Barrier;
    std::size_t bytes = 0;
    DataType dtype = DataType::Uint8;
    ReduceOp op = ReduceOp::Sum;
    Needs provided = kNeedsNothing;
    Selection choice;
  };
  static constexpr std::size_t kEntries = 64;
  Entry entries_[kEntries];
};

}  // namespace chorus::algorithms
