// chorus-plan's planner: every layout of a GPT over a world, its predicted step time and
// memory per rank, best first (docs/planner.md). No torch, no communicator: the cost model of
// Chorus's collectives (algorithms/cost_model.hpp) and the formulas of model.hpp.
#pragma once

#include "plan/collective_costs.hpp"
#include "plan/machine.hpp"
#include "plan/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::plan {

struct PlanRequest {
  ModelConfig model;
  std::int64_t global_batch = 8;  ///< samples per optimizer step over all replicas
  std::int64_t micro_batch = 0;   ///< samples per micro-batch; 0: searched
  int ranks_per_host = 1;
  int hosts = 1;
  double memory_budget = 0;  ///< bytes per rank; 0: the machine's memory_bytes (0: no limit)
  Machine machine;
  /// Pipeline messages of a tp > 1 stage without SP sent as 1/tp shards, one per tp rank, and
  /// all-gathered over tp on arrival (Megatron-LM's scatter/gather, arXiv 2104.04473 section
  /// 4.1); false: every tp rank sends the whole boundary, as chorus-train's pipeline does.
  bool pipeline_scatter_gather = false;
  int world() const { return ranks_per_host * hosts; }
  double budget() const { return memory_budget > 0 ? memory_budget : machine.memory_bytes; }
};

/// One group's communication in a step: the part on the critical path and the part hidden
/// behind computation.
struct GroupTime {
  std::string group;  ///< tp, cp, ep, pp, dp, embedding
  double exposed = 0;
  double overlapped = 0;
};

struct MemoryUse {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  /// The pipeline's boundary tensors beyond the blocks' activations: each micro-batch chunk
  /// in flight's received input, and one received output gradient and one input gradient
  /// waiting for its send (pp > 1 only).
  double boundaries = 0;
  /// Parameters, gradients and optimizer state.
  double states() const { return parameters + gradients + optimizer; }
  double total() const { return states() + activations + boundaries; }
};

struct Prediction {
  Layout layout;
  double step_seconds = 0;
  double compute_seconds = 0;  ///< the heaviest stage's forward and backward over the step
  double bubble_seconds = 0;   ///< pipeline fill and drain
  /// The optimizer's step with clipping (a compute profile's optimizer line; else 0).
  double optimizer_seconds = 0;
  std::vector<GroupTime> groups;
  MemoryUse memory;
  double exposed_communication() const;
  double group_exposed(const std::string& group) const;
};

/// Every layout the world allows (PARALLEL.md's rules: world = tp * pp * cp * dp; tp * cp
/// divides the heads; cp divides the sequence, and with SP tp * cp does; pp <= layers (uneven
/// stages allowed); ep divides dp * cp and the experts; the replica's batch splits into
/// micro-batches; ZeRO-2/3 only at pp 1; interleaved needs m >= pp and layers >= pp * v),
/// before memory is considered. Empty with `why` set when none does.
std::vector<Layout> candidate_layouts(const PlanRequest& request, std::string* why);

/// The step time and memory of one layout. `costs` remembers collective costs across calls.
Prediction predict(const PlanRequest& request, const Layout& layout, CollectiveCosts& costs);

struct PlanResult {
  std::vector<Prediction> feasible;  ///< best (shortest step) first
  std::size_t candidates = 0;        ///< layouts predicted before the memory budget
  /// Why nothing is feasible: the resource that binds and by how much ("" when something is).
  std::string infeasible;
  /// compute_concurrency_warning(request): "" or why the compute times may be off.
  std::string warning;
};
PlanResult plan(const PlanRequest& request);

/// "" unless the machine's compute profile was taken with a number of processes computing at
/// once other than the request's ranks per host; then a sentence naming both numbers: ranks
/// that share a host's cores compute slower together than alone, so the profile's times are
/// too low (fewer processes) or too high (more) for this plan.
std::string compute_concurrency_warning(const PlanRequest& request);

/// The chorusrun + chorus-train command line that runs `layout`.
std::string command_line(const PlanRequest& request, const Layout& layout);
/// Why `best` beats `runner_up`: the terms that differ most, in seconds.
std::string explain(const Prediction& best, const Prediction& runner_up);
/// The plan as JSON (the first `limit` layouts; 0: all).
std::string to_json(const PlanRequest& request, const PlanResult& result, std::size_t limit);
/// The plan as a text table with each layout's breakdown and command line.
std::string to_text(const PlanRequest& request, const PlanResult& result, std::size_t limit);

}  // namespace chorus::plan
