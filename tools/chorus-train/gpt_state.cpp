// The GPT run's checkpoints: the model and the optimizer's state; see gpt_state.hpp.
#include "gpt_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint_format.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/reducer.hpp>

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

DataType state_type(const torch::Tensor& t) {
  require_argument(t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble,
                   "chorus-train: optimizer state of type " +
                       std::string(c10::toString(t.scalar_type())) + " (fp32 or fp64 expected)");
  return t.scalar_type() == torch::kFloat ? DataType::Float32 : DataType::Float64;
}

/// Collective over `group`: the shards `shard` of every rank, end to end.
torch::Tensor all_gathered(const train::Group& group, const torch::Tensor& shard) {
  torch::Tensor whole = torch::empty({shard.numel() * group.size()}, shard.options());
  group.record(train::CollectiveKind::AllGather, static_cast<std::size_t>(whole.nbytes()));
  Communicator comm = group.comm;
  comm.all_gather(shard.data_ptr(), whole.data_ptr(), static_cast<std::size_t>(shard.numel()),
                  state_type(shard));
  return whole;
}

/// The state tensor `name` of a shard's state.
const torch::Tensor& named(const train::ShardState& state, const std::string& name) {
  for (const auto& [key, tensor] : state.tensors)
    if (key == name) return tensor;
  throw Error(Status::InvalidArgument, "chorus-train: the optimizer's shard state has no " + name);
}

}  // namespace

GptOptimizerState optimizer_state(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                                  const GptShare& share, std::int64_t steps) {
  GptOptimizerState out;
  const auto it = optimizer.state().find(key_of(share.parameters.front().tensor));
  if (it == optimizer.state().end()) return out;
  out.step = kind == OptimizerKind::Adam
                 ? static_cast<const torch::optim::AdamParamState&>(*it->second).step()
                 : steps;
  out.slots.assign(slot_names(kind).size(), std::vector<torch::Tensor>(share.parameters.size()));
  for (std::size_t i = 0; i < share.parameters.size(); ++i) {
    const auto values = slots_of(optimizer, kind, share.parameters[i].tensor);
    for (std::size_t k = 0; k < values.size(); ++k) out.slots[k][i] = values[k];
  }
  return out;
}

void set_optimizer_state(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                         const GptShare& share, const GptOptimizerState& state) {
  optimizer.state().clear();
  if (state.slots.empty()) return;
  for (std::size_t i = 0; i < share.parameters.size(); ++i) {
    std::vector<torch::Tensor> values;
    for (const auto& slot : state.slots) values.push_back(slot[i]);
    set_slots(optimizer, kind, share.parameters[i].tensor, values, state.step);
  }
}

// Every rank's shards hold the same state names and step (they step together), so every rank
// issues the same all-gathers, or none before the first step.
GptOptimizerState zero_optimizer_state(train::ZeroOptimizer& zero, OptimizerKind kind,
                                       std::int64_t steps) {
  const train::GradientReducer& reducer = zero.reducer();
  const std::vector<train::BucketLayout> layouts = reducer.bucket_layouts();
  const std::vector<torch::Tensor> shards = zero.parameter_shards();
  const std::vector<std::string> names = slot_names(kind);
  GptOptimizerState out;
  for (std::size_t b = 0; b < shards.size(); ++b) {
    const train::ShardState state = train::shard_state(zero.optimizer(), shards[b]);
    if (state.tensors.empty()) return {};
    if (out.slots.empty()) {
      out.step = kind == OptimizerKind::Adam ? state.step : steps;
      out.slots.assign(names.size(), std::vector<torch::Tensor>(reducer.parameters().size()));
    }
    const train::BucketLayout& layout = layouts[b];
    for (std::size_t k = 0; k < names.size(); ++k) {
      const torch::Tensor whole = all_gathered(reducer.group(), named(state, names[k]));
      for (std::size_t j = 0; j < layout.params.size(); ++j) {
        const torch::Tensor& p = reducer.parameters()[layout.params[j]];
        out.slots[k][layout.params[j]] =
            whole.narrow(0, layout.offsets[j], p.numel()).view(p.sizes());
      }
    }
  }
  return out;
}

void set_zero_optimizer_state(train::ZeroOptimizer& zero, OptimizerKind kind,
                              const GptOptimizerState& state) {
  zero.optimizer().state().clear();
  if (state.slots.empty()) return;
  const std::vector<torch::Tensor> shards = zero.parameter_shards();
  std::vector<std::vector<torch::Tensor>> values(shards.size());
  for (std::size_t b = 0; b < shards.size(); ++b)
    for (std::size_t k = 0; k < state.slots.size(); ++k)
      values[b].push_back(torch::zeros_like(shards[b].detach()));
  torch::NoGradGuard no_grad;
  for (const train::ShardPiece& piece : zero.shard_layout()) {
    for (std::size_t k = 0; k < state.slots.size(); ++k) {
      const torch::Tensor& whole = state.slots[k][piece.param];
      values[piece.shard][k]
          .narrow(0, piece.shard_offset, piece.length)
          .copy_(whole.reshape(-1).narrow(0, piece.param_offset, piece.length));
    }
  }
  for (std::size_t b = 0; b < shards.size(); ++b)
    set_slots(zero.optimizer(), kind, shards[b], values[b], state.step);
}

void save_gpt_run(const std::string& path, const GptShare& share,
                  const GptOptimizerState& optimizer, OptimizerKind kind,
                  const train::TrainingState& state, const Communicator& comm) {
  train::TrainingState saved = state;
  saved.extra[kOptimizerStep] = optimizer.step;
  const std::vector<train::GptParameter> holders = holders_of(share);
  const auto names = slot_names(kind);
  for (std::size_t slot = 0; slot < names.size(); ++slot) {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < holders.size(); ++i) {
      const bool held = !optimizer.slots.empty() && optimizer.slots[slot][i].defined();
      if (held) {
        holders[i].tensor.copy_(optimizer.slots[slot][i]);
      } else {
        holders[i].tensor.zero_();
      }
    }
    train::save_gpt_checkpoint(slot_path(path, names[slot]), holders, share.config, share.tp, saved,
                               comm);
  }
  train::save_gpt_checkpoint(path, share.parameters, share.config, share.tp, saved, comm);
}

std::optional<GptRunState> load_gpt_run(const std::string& path, const GptShare& share,
                                        OptimizerKind kind, const train::RunConfig& config) {
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
  GptRunState out{state, {}};
  for (const std::string& name : slot_names(kind)) {
    const std::vector<train::GptParameter> holders = holders_of(share);
    const std::string slot = slot_path(path, name);
    const train::TrainingState slot_state =
        train::load_gpt_checkpoint(slot, holders, share.config, share.tp);
    require_argument(slot_state.step == state.step,
                     "checkpoint " + slot + " is of step " + std::to_string(slot_state.step) +
                         ", " + path + " of step " + std::to_string(state.step));
    out.optimizer.slots.emplace_back();
    for (const train::GptParameter& p : holders) out.optimizer.slots.back().push_back(p.tensor);
  }
  train::load_gpt_checkpoint(path, share.parameters, share.config, share.tp);
  out.optimizer.step = step->second;
  if (step->second == 0) out.optimizer.slots.clear();  // saved before the first optimizer step
  return out;
}

}  // namespace chorus::train_tool
