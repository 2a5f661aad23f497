// Internal state of Zero3, shared by zero3.cpp (construction, step protocol) and
// zero3_units.cpp (gathering and freeing units, run_unit, the backward hooks).
#pragma once

#include <chorus/train/zero3.hpp>

#include <c10/core/Storage.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace chorus::train {

/// One unit: its shard (the optimizer's parameter) and the storage its parameters alias,
/// holding the gathered flat buffer or nothing.
struct Zero3Unit {
  enum class State { Free, Gathering, Gathered };
  BucketLayout layout;
  at::Tensor shard;  ///< block rank of the flat buffer, padded_numel / d elements
  at::Tensor half;   ///< mixed precision: the shard rounded to the units' type
  /// What the all-gathers send: the half block under mixed precision, else the shard.
  const at::Tensor& sent() const { return half.defined() ? half : shard; }
  c10::Storage storage;  ///< padded_numel elements when gathered, none when free
  State state = State::Free;
  chorus::Request request;  ///< the all-gather while Gathering
  std::size_t pending = 0;  ///< parameters whose gradient has not arrived in this backward
  std::int64_t bytes() const {
    return layout.padded_numel * static_cast<std::int64_t>(c10::elementSize(layout.type));
  }
};

struct Zero3::Impl {
  Impl(std::vector<at::Tensor> p, std::vector<std::vector<std::size_t>> u, Group g,
       const ShardOptimizerFactory& make, Zero3Options o);
  ~Impl();

  // Construction (zero3.cpp).
  void check(const std::vector<std::vector<std::size_t>>& units) const;
  std::vector<at::Tensor> whole_units(const std::vector<std::vector<std::size_t>>& units);
  void seat(std::vector<at::Tensor> flats);
  ReducerOptions reducer_options() const;
  std::size_t bucket_of(std::size_t unit) const { return units.size() - 1 - unit; }

  // Units (zero3_units.cpp); the caller holds `mutex`.
  void issue(Zero3Unit& unit);
  void wait(Zero3Unit& unit);
  void ensure_gathered(std::size_t unit);
  void release(std::size_t unit);
  void release_all();
  void prefetch_forward(std::size_t call);
  void before_backward(std::size_t call);  ///< from the unit's output node in backward
  void gradient_arrived(std::size_t param);
  void install_hooks();
  at::Tensor flat_view(const Zero3Unit& unit) const;  ///< the gathered buffer as a tensor

  std::vector<at::Tensor> params;
  Group group;
  /// A split of group.comm that carries the all-gathers (recorded on `group`): the reducer
  /// issues its reduce-scatters when a weighted step's scale happens to have arrived, so the
  /// two sequences interleave differently on different ranks; each alone is the same on all.
  Communicator gather_comm;
  Zero3Options options;
  std::vector<Zero3Unit> units;
  std::vector<BucketLayout> layouts;  ///< units[k].layout, for unit_layouts()
  std::vector<std::size_t> unit_of;   ///< param -> unit
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<GradientReducer> reducer;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<std::uintptr_t> hook_keys;

  std::mutex mutex;
  std::vector<std::size_t> calls;     ///< units run_unit ran since the last finish_step
  std::vector<std::size_t> previous;  ///< calls of the previous step (forward prefetch order)
  std::int64_t gathered_bytes = 0;
  std::int64_t peak_gathered = 0;
};

}  // namespace chorus::train
