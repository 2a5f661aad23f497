// The two training tasks of chorus-train: a model, its data and how a batch is built.
// Includes torch: only the files that include torch (tasks, trainer, gpt_*) include it.
#pragma once

#include "options.hpp"

#include <chorus/train/checkpoint.hpp>
#include <chorus/train/zero3.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train_tool {

/// Inputs and class targets of one batch. The model's logits have shape
/// [targets.numel(), classes] (the LSTM flattens batch x time).
struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string describe() const = 0;
  /// The model's structure and training data, as a checkpoint records them (--model,
  /// --hidden, ..., "training set"): a resume must find the same.
  virtual train::RunConfig config() const = 0;
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  virtual std::size_t train_size() const = 0;
  virtual std::size_t test_size() const = 0;
  /// The samples `indices` of the train or test split.
  virtual Batch batch(const std::vector<std::size_t>& indices, bool train) const = 0;
  /// Logits [N, classes] for a batch's input.
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  /// ZeRO-3 (--zero 3): the units over module()->parameters(), one per layer that holds
  /// parameters; empty when the task cannot run sharded.
  virtual std::vector<std::vector<std::size_t>> zero3_units() const { return {}; }
  /// forward() with each unit's layer run through zero.run_unit.
  virtual torch::Tensor forward_sharded(const torch::Tensor& input, train::Zero3& zero) {
    (void)zero;
    return forward(input);
  }
  /// Global-norm clipping threshold (0 = none).
  virtual double clip_norm() const = 0;
};

/// Builds the task `options.model` selects; weights drawn from torch's generator, which the
/// caller seeds. Loads the data from the Debian packages (see include/chorus/train/data.hpp).
std::unique_ptr<Task> make_task(const Options& options);

/// --mixed-precision as ZeRO's compute type (nullopt: fp32).
std::optional<torch::ScalarType> mixed_precision(const Options& options);

/// The optimizer `options` selects (--optimizer, --lr) over `parameters`.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Options& options,
                                                        std::vector<torch::Tensor> parameters);

}  // namespace chorus::train_tool
