// Internal state of DistributedDataParallel, shared by ddp.cpp (construction, step protocol)
// and replicas.cpp (clipping, replica checks, local SGD). The gradient reduction itself is a
// GradientReducer (reducer.hpp) over the communicator. Includes torch: only those two files
// may include it.
#pragma once

#include <chorus/train/ddp.hpp>
#include <chorus/train/reducer.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace chorus::train {

struct DistributedDataParallel::Impl {
  Impl(std::shared_ptr<torch::nn::Module> m, chorus::Communicator c, DdpOptions o);

  // Step protocol (ddp.cpp).
  void prepare(std::int64_t local_samples);
  void finish();
  void rescale_accumulated(std::int64_t from, std::int64_t to);
  void broadcast_tensors(const std::vector<torch::Tensor>& tensors);

  // Replicas (replicas.cpp).
  double clip_grad_norm(double max_norm);
  bool verify_replicas();
  void average_parameters();
  bool local_sgd() const { return options.average_parameters_every > 0; }

  std::shared_ptr<torch::nn::Module> module;
  chorus::Communicator comm;
  DdpOptions options;
  std::vector<torch::Tensor> params;   ///< module->parameters() order
  std::vector<torch::Tensor> buffers;  ///< module->buffers() order
  /// Reduces every parameter that requires a gradient over comm; its hooks mark them ready.
  std::unique_ptr<GradientReducer> reducer;

  // Step state, guarded by mutex.
  std::mutex mutex;
  bool active = false;  ///< prepare_for_backward() called, finish pending
  int no_sync_depth = 0;
  std::int64_t accum_samples = 0;  ///< samples of earlier no_sync micro-batches
  std::int64_t last_micro = 0;     ///< param.grad is in units of 1/last_micro (see prepare)
  std::int64_t steps = 0;          ///< after_optimizer_step() calls
};

/// Chorus element type of a torch dtype; throws InvalidArgument for one Chorus cannot move.
chorus::DataType chorus_dtype(torch::ScalarType type);

}  // namespace chorus::train
