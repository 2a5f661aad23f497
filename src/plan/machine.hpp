// The machine a plan is made for: compute rate per rank, links, precision, memory
// (docs/planner.md, "Machine profiles"). Read from text files: a machine profile (planner keys
// plus the cost model's tuning keys, shm.* = inside a host, tcp.* = between hosts), a tuning
// file as `chorus-perf --tune` writes it, and a compute profile of measured per-layer times.
#pragma once

#include "algorithms/cost_model.hpp"
#include "plan/compute_model.hpp"
#include "plan/model.hpp"

#include <istream>
#include <optional>
#include <string>
#include <string_view>

namespace chorus::plan {

struct Machine {
  std::string name = "unnamed";
  double peak_flops = 0;  ///< per rank, FLOP/s
  double efficiency = 1;  ///< fraction of the peak the model's matrix products reach
  /// The compute model fitted to a compute profile's measured times; none: compute runs at
  /// peak_flops * efficiency (and the memory traffic at memory_bandwidth).
  std::optional<ComputeModel> measured;
  /// Bytes per second of the rank's memory (HBM) for the element-wise kernels
  /// (block_memory_traffic); 0: their time is not modelled apart from the FLOP rate.
  double memory_bandwidth = 0;
  algorithms::CostParameters links = algorithms::CostParameters::defaults();
  Precision precision = Precision::fp32();
  double memory_bytes = 0;  ///< per rank; 0: not given

  /// FLOP/s of a block's forward and backward: measured, the fitted lines' marginal rates.
  double forward_flops_per_second() const;
  double backward_flops_per_second() const;
  /// Whether compute can be timed at all: a measured model's block lines (a constant line,
  /// fitted when a profile's larger micro-batches were no slower, has no marginal rate but
  /// still times every block), else a positive peak × efficiency.
  bool times_compute() const;
  /// Seconds of `bytes` of element-wise memory traffic: 0 without a memory bandwidth, and 0
  /// with a measured model (a compute profile's times include the element-wise kernels).
  double memory_seconds(double bytes) const;
};

/// A machine profile: '#' comments and "key value" lines. Planner keys: name, peak_tflops,
/// efficiency, memory_gib, memory_gb_per_s, precision (fp32|bf16); every other key is a tuning key
/// (read_tuning). Throws Error(InvalidArgument) naming the line for anything else.
Machine read_machine_profile(std::istream& in, std::string_view source);
Machine load_machine_profile(const std::string& path);

/// Replaces the links by a tuning file's (CHORUS_TUNING_FILE's format).
void load_tuning(Machine& machine, const std::string& path);

/// A compute profile (compute_profile.hpp: the block's shape, layer_forward_ms and
/// layer_backward_ms, optional per-block, embedding, head, optimizer and further micro-batch
/// size lines). Sets the machine's measured compute model (fit_compute_model). Throws
/// Error(InvalidArgument) naming what is missing or bad.
void read_compute_profile(Machine& machine, std::istream& in, std::string_view source);
void load_compute_profile(Machine& machine, const std::string& path);

}  // namespace chorus::plan
