// SGD's, Adam's and AdamW's per-tensor state as named slots; see optimizer_slots.hpp.
#include "optimizer_slots.hpp"

#include "../checkpoint_checks.hpp"

#include <chorus/error.hpp>

#include <memory>

namespace chorus::train::detail {
namespace {

using namespace torch::optim;

std::string key_of(const at::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

template <class Options>
const Options& first_options(const Optimizer& optimizer) {
  return static_cast<const Options&>(optimizer.param_groups().front().options());
}

template <class State>
SlotValues adam_values(const State& s, bool amsgrad) {
  SlotValues v{{s.exp_avg(), s.exp_avg_sq()}, s.step()};
  if (amsgrad) v.tensors.push_back(s.max_exp_avg_sq());
  return v;
}

template <class State>
std::unique_ptr<State> adam_state(const SlotValues& v) {
  auto s = std::make_unique<State>();
  s->step(v.step);
  s->exp_avg(v.tensors[0]);
  s->exp_avg_sq(v.tensors[1]);
  if (v.tensors.size() > 2) s->max_exp_avg_sq(v.tensors[2]);
  return s;
}

}  // namespace

SlotKind slot_kind(const Optimizer& optimizer) {
  SlotKind kind{optimizer_type(optimizer), {}, false};
  require_argument(!optimizer.param_groups().empty(),
                   "sharded checkpoints: the optimizer has no parameter groups");
  bool amsgrad = false;
  if (kind.type == "SGD") {
    if (first_options<SGDOptions>(optimizer).momentum() != 0) kind.slots = {"momentum_buffer"};
    return kind;
  }
  if (kind.type == "Adam") {
    amsgrad = first_options<AdamOptions>(optimizer).amsgrad();
  } else if (kind.type == "AdamW") {
    amsgrad = first_options<AdamWOptions>(optimizer).amsgrad();
  } else {
    throw Error(Status::InvalidArgument,
                "sharded checkpoints hold the state of SGD, Adam and AdamW optimizers, not of " +
                    kind.type);
  }
  kind.slots = {"exp_avg", "exp_avg_sq"};
  if (amsgrad) kind.slots.emplace_back("max_exp_avg_sq");
  kind.has_step = true;
  return kind;
}

std::optional<SlotValues> read_slots(Optimizer& optimizer, const SlotKind& kind,
                                     const at::Tensor& tensor) {
  if (kind.slots.empty()) return std::nullopt;
  const auto it = optimizer.state().find(key_of(tensor));
  if (it == optimizer.state().end()) return std::nullopt;
  const bool amsgrad = kind.slots.size() > 2;
  if (kind.type == "Adam")
    return adam_values(static_cast<const AdamParamState&>(*it->second), amsgrad);
  if (kind.type == "AdamW") {
    return adam_values(static_cast<const AdamWParamState&>(*it->second), amsgrad);
  }
  const auto& s = static_cast<const SGDParamState&>(*it->second);
  if (!s.momentum_buffer().defined()) return std::nullopt;
  return SlotValues{{s.momentum_buffer()}, 0};
}

void write_slots(Optimizer& optimizer, const SlotKind& kind, const at::Tensor& tensor,
                 const std::optional<SlotValues>& values) {
  const std::string key = key_of(tensor);
  if (!values) {
    optimizer.state().erase(key);
    return;
  }
  if (kind.type == "Adam") {
    optimizer.state()[key] = adam_state<AdamParamState>(*values);
  } else if (kind.type == "AdamW") {
    optimizer.state()[key] = adam_state<AdamWParamState>(*values);
  } else {
    auto s = std::make_unique<SGDParamState>();
    s->momentum_buffer(values->tensors[0]);
    optimizer.state()[key] = std::move(s);
  }
}

}  // namespace chorus::train::detail
