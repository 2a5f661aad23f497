// The per-tensor state of libtorch's SGD, Adam and AdamW optimizers as named slots, read from
// and written into an optimizer, for the sharded checkpoints (sharded_checkpoint.hpp). Private
// to src/train; includes torch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train::detail {

/// What an optimizer keeps per tensor: its slots' names (SGD with momentum: momentum_buffer;
/// Adam and AdamW: exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad) and whether it counts
/// steps (Adam, AdamW). The first parameter group's options decide.
struct SlotKind {
  std::string type;  ///< "SGD", "Adam", "AdamW"
  std::vector<std::string> slots;
  bool has_step = false;
};

/// InvalidArgument "sharded checkpoints hold the state of SGD, Adam and AdamW optimizers, not
/// of Adagrad" for another optimizer.
SlotKind slot_kind(const torch::optim::Optimizer& optimizer);

/// One tensor's state: a tensor per slot (in SlotKind order, the tensor's shape) and the step.
struct SlotValues {
  std::vector<at::Tensor> tensors;
  std::int64_t step = 0;
};

/// The state `optimizer` keeps for `tensor`; nullopt when it has none yet (before its first
/// step) or keeps no slots (SGD without momentum).
std::optional<SlotValues> read_slots(torch::optim::Optimizer& optimizer, const SlotKind& kind,
                                     const at::Tensor& tensor);

/// Replaces the state `optimizer` keeps for `tensor` by `values` (nullopt: no state).
void write_slots(torch::optim::Optimizer& optimizer, const SlotKind& kind, const at::Tensor& tensor,
                 const std::optional<SlotValues>& values);

}  // namespace chorus::train::detail
