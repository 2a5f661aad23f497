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
                            const train::GptModel& model, std::int64_t steps) {
  const auto p = model.parameters().front();
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

}  // namespace

void save_gpt_run(const std::string& path, const train::GptModel& model,
                  torch::optim::Optimizer& optimizer, OptimizerKind kind,
                  const train::TrainingState& state, const Communicator& comm) {
  train::TrainingState saved = state;
  saved.extra[kOptimizerStep] = optimizer_step(optimizer, kind, model, state.step);
  // A model of the same layout holds each slot's tensors: the GPT checkpoint then lays them
  // out as the parameters they belong to.
  train::GptModel holder(model.config(), model.tp());
  const auto params = model.parameters();
  const auto holders = holder.parameters();
  const auto names = slot_names(kind);
  for (std::size_t slot = 0; slot < names.size(); ++slot) {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto values = slots_of(optimizer, kind, params[i]);
      if (values.empty()) {
        holders[i].zero_();
      } else {
        holders[i].copy_(values[slot]);
      }
    }
    train::save_gpt_checkpoint(slot_path(path, names[slot]), holder, saved, comm);
  }
  train::save_gpt_checkpoint(path, model, saved, comm);
}

std::optional<train::TrainingState> load_gpt_run(const std::string& path, train::GptModel& model,
                                                 torch::optim::Optimizer& optimizer,
                                                 OptimizerKind kind,
                                                 const train::RunConfig& config) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  const train::CheckpointHeader header = train::read_tensor_checkpoint(path).header;
  const train::TrainingState& state = header.state;
  train::RunConfig wanted = config;
  train::RunConfig saved = state.config;
  for (const auto& [name, value] : train::gpt_model_description(model.config())) {
    wanted["model " + name] = value;
  }
  for (const auto& [name, value] : header.model) saved["model " + name] = value;
  const std::string difference = train::config_difference(path, saved, wanted);
  require_argument(difference.empty(), difference);
  const auto step = state.extra.find(kOptimizerStep);
  require_argument(step != state.extra.end(), "checkpoint " + path + " has no optimizer step");
  // Every slot into a holder model first: nothing changes when one is refused.
  const auto names = slot_names(kind);
  std::vector<train::GptModel> holders;
  for (const std::string& name : names) {
    holders.emplace_back(model.config(), model.tp());
    const std::string slot = slot_path(path, name);
    const train::TrainingState slot_state = train::load_gpt_checkpoint(slot, holders.back());
    require_argument(slot_state.step == state.step,
                     "checkpoint " + slot + " is of step " + std::to_string(slot_state.step) +
                         ", " + path + " of step " + std::to_string(state.step));
  }
  train::load_gpt_checkpoint(path, model);
  optimizer.state().clear();
  if (step->second == 0) return state;  // saved before the first optimizer step
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<torch::Tensor> values;
    for (const train::GptModel& holder : holders) {
      values.push_back(holder.parameters()[i].detach().clone());
    }
    set_slots(optimizer, kind, params[i], values, step->second);
  }
  return state;
}

}  // namespace chorus::train_tool
