// The GPT run's checkpoints: the model and the optimizer's state; see gpt_state.hpp.
#include "gpt_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint_format.hpp>
#include <chorus/train/gpt_checkpoint.hpp>

#include <filesystem>
#include <vector>

namespace chorus::train_tool {
namespace {

/// extra["optimizer_step"]: Adam's step count (SGD: steps taken); 0 = no state yet.
constexpr const char* kOptimizerStep = "optimizer_step";

std::vector<std::string> slot_names(OptimizerKind kind) {
  if (kind == OptimizerKind::Adam) return {"exp_avg", "exp_avg_sq"};
  return {"momentum_buffer"};
}

std::string key_of(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

/// The optimizer's state tensors of `p`, one per slot (empty when it has none yet).
std::vector<torch::Tensor> slots_of(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                                    const torch::Tensor& p) {
  const auto it = optimizer.state().find(key_of(p));
  if (it == optimizer.state().end()) return {};
  if (kind == OptimizerKind::Adam) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
    return {s.exp_avg(), s.exp_avg_sq()};
  }
  const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
  return {s.momentum_buffer()};
}

void set_slots(torch::optim::Optimizer& optimizer, OptimizerKind kind, const torch::Tensor& p,
               const std::vector<torch::Tensor>& values, std::int64_t step) {
  if (kind == OptimizerKind::Adam) {
    auto state = std::make_unique<torch::optim::AdamParamState>();
    state->step(step);
    state->exp_avg(values[0]);
    state->exp_avg_sq(values[1]);
    optimizer.state()[key_of(p)] = std::move(state);
    return;
  }
  auto state = std::make_unique<torch::optim::SGDParamState>();
  state->momentum_buffer(values[0]);
  optimizer.state()[key_of(p)] = std::move(state);
}

std::int64_t optimizer_step(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                            const GptShare& share, std::int64_t steps) {
  const auto p = share.parameters.front().tensor;
  const auto it = optimizer.state().find(key_of(p));
  if (it == optimizer.state().end()) return 0;
  if (kind == OptimizerKind::Adam) {
    return static_cast<const torch::optim::AdamParamState&>(*it->second).step();
  }
  return steps;
}

std::string slot_path(const std::string& path, const std::string& slot) {
  return path + "." + slot;
}

/// Zero tensors shaped as `share`'s parameters, under their names: they hold one slot's
/// tensors, which the GPT checkpoint then lays out as the parameters they belong to.
std::vector<train::GptParameter> holders_of(const GptShare& share) {
  std::vector<train::GptParameter> out = share.parameters;
  for (train::GptParameter& p : out) p.tensor = torch::zeros_like(p.tensor.detach());
  return out;
}

}  // namespace

void save_gpt_run(const std::string& path, const GptShare& share,
                  torch::optim::Optimizer& optimizer, OptimizerKind kind,
                  const train::TrainingState& state, const Communicator& comm) {
  train::TrainingState saved = state;
  saved.extra[kOptimizerStep] = optimizer_step(optimizer, kind, share, state.step);
  const std::vector<train::GptParameter> holders = holders_of(share);
  const auto names = slot_names(kind);
  for (std::size_t slot = 0; slot < names.size(); ++slot) {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < holders.size(); ++i) {
      const auto values = slots_of(optimizer, kind, share.parameters[i].tensor);
      if (values.empty()) {
        holders[i].tensor.zero_();
      } else {
        holders[i].tensor.copy_(values[slot]);
      }
    }
    train::save_gpt_checkpoint(slot_path(path, names[slot]), holders, share.config, share.tp, saved,
                               comm);
  }
  train::save_gpt_checkpoint(path, share.parameters, share.config, share.tp, saved, comm);
}

std::optional<train::TrainingState> load_gpt_run(const std::string& path, const GptShare& share,
                                                 torch::optim::Optimizer& optimizer,
                                                 OptimizerKind kind,
                                                 const train::RunConfig& config) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  const train::CheckpointHeader header = train::read_tensor_checkpoint(path).header;
  const train::TrainingState& state = header.state;
  train::RunConfig wanted = config;
  train::RunConfig saved = state.config;
  for (const auto& [name, value] : train::gpt_model_description(share.config)) {
    wanted["model " + name] = value;
  }
  for (const auto& [name, value] : header.model) saved["model " + name] = value;
  const std::string difference = train::config_difference(path, saved, wanted);
  require_argument(difference.empty(), difference);
  const auto step = state.extra.find(kOptimizerStep);
  require_argument(step != state.extra.end(), "checkpoint " + path + " has no optimizer step");
  // Every slot into holders first: nothing changes when one is refused.
  const auto names = slot_names(kind);
  std::vector<std::vector<train::GptParameter>> holders;
  for (const std::string& name : names) {
    holders.push_back(holders_of(share));
    const std::string slot = slot_path(path, name);
    const train::TrainingState slot_state =
        train::load_gpt_checkpoint(slot, holders.back(), share.config, share.tp);
    require_argument(slot_state.step == state.step,
                     "checkpoint " + slot + " is of step " + std::to_string(slot_state.step) +
                         ", " + path + " of step " + std::to_string(state.step));
  }
  train::load_gpt_checkpoint(path, share.parameters, share.config, share.tp);
  optimizer.state().clear();
  if (step->second == 0) return state;  // saved before the first optimizer step
  for (std::size_t i = 0; i < share.parameters.size(); ++i) {
    std::vector<torch::Tensor> values;
    for (const auto& slot : holders) values.push_back(slot[i].tensor);
    set_slots(optimizer, kind, share.parameters[i].tensor, values, step->second);
  }
  return state;
}

}  // namespace chorus::train_tool
