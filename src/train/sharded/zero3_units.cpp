// Zero3's units: all-gathers into a unit's storage and freeing it, prefetching, run_unit and
// its identity node whose backward gathers the unit again, the gradient hooks that free a unit
// when its backward ends, full_parameters(). See zero3.hpp.
#include "zero3_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

namespace chorus::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using State = Zero3Unit::State;

/// Identity on a unit's output; its backward (the first of the unit's backward nodes to run)
/// makes the unit's parameters whole again before the unit's own nodes read them.
struct UnitOutput : torch::autograd::Function<UnitOutput> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t impl,
                            std::int64_t call) {
    ctx->saved_data["impl"] = impl;
    ctx->saved_data["call"] = call;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* impl = reinterpret_cast<Zero3::Impl*>(ctx->saved_data["impl"].toInt());
    impl->before_backward(static_cast<std::size_t>(ctx->saved_data["call"].toInt()));
    return {grads[0], {}, {}};
  }
};

}  // namespace

at::Tensor Zero3::Impl::flat_view(const Zero3Unit& unit) const {
  at::Tensor flat = at::empty({0}, at::TensorOptions().dtype(unit.layout.type));
  flat.set_(unit.storage, 0, {unit.layout.padded_numel}, {1});
  return flat;
}

// The storage gets a fresh buffer and the ranks' shards are gathered into it (a copy on a
// group of one rank).
void Zero3::Impl::issue(Zero3Unit& unit) {
  const auto bytes = static_cast<std::size_t>(unit.bytes());
  unit.storage.set_data_ptr_noswap(c10::GetCPUAllocator()->allocate(bytes));
  unit.storage.set_nbytes(bytes);
  gathered_bytes += unit.bytes();
  peak_gathered = std::max(peak_gathered, gathered_bytes);
  if (group.size() == 1) {
    at::NoGradGuard no_grad;
    flat_view(unit).copy_(unit.sent());
    unit.state = State::Gathered;
    return;
  }
  group.record(CollectiveKind::AllGather, bytes);
  unit.request = gather_comm.iall_gather(unit.sent().data_ptr(), unit.storage.data(),
                                         static_cast<std::size_t>(unit.sent().numel()),
                                         detail::chorus_dtype(unit.layout.type, "Zero3"));
  unit.state = State::Gathering;
}

void Zero3::Impl::wait(Zero3Unit& unit) {
  if (unit.state != State::Gathering) return;
  unit.request.wait();
  unit.state = State::Gathered;
}

void Zero3::Impl::ensure_gathered(std::size_t k) {
  if (units[k].state == State::Free) issue(units[k]);
  wait(units[k]);
}

void Zero3::Impl::release(std::size_t k) {
  Zero3Unit& unit = units[k];
  if (unit.state == State::Free) return;
  wait(unit);
  unit.storage.set_data_ptr_noswap(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
  unit.storage.set_nbytes(0);
  unit.state = State::Free;
  gathered_bytes -= unit.bytes();
}

void Zero3::Impl::release_all() {
  for (std::size_t k = 0; k < units.size(); ++k) {
    release(k);
    units[k].pending = units[k].layout.params.size();
  }
}

// The units of the next calls: those of the previous step's calls at the same positions, or,
// in the first step, the units after this one in list order that this step has not run yet. A
// unit run twice (the GPT's embedding, again for its head) must not prefetch the units after it
// in the list: their forward is over, and they would stay gathered until their backward ends.
void Zero3::Impl::prefetch_forward(std::size_t call) {
  for (std::size_t j = 1; j <= options.prefetch; ++j) {
    std::size_t next = units.size();
    if (!previous.empty()) {
      if (call + j < previous.size()) next = previous[call + j];
    } else if (calls[call] + j < units.size() &&
               std::find(calls.begin(), calls.end(), calls[call] + j) == calls.end()) {
      next = calls[call] + j;
    }
    if (next < units.size() && units[next].state == State::Free) issue(units[next]);
  }
}

void Zero3::Impl::before_backward(std::size_t call) {
  std::lock_guard lock(mutex);
  ensure_gathered(calls.at(call));
  for (std::size_t j = 1; j <= options.prefetch && j <= call; ++j) {
    Zero3Unit& unit = units[calls[call - j]];
    if (unit.state == State::Free) issue(unit);
  }
}

// After the reducer's own hook has taken the gradient: when it is the unit's last in this
// backward, the unit's parameters are no longer needed.
void Zero3::Impl::gradient_arrived(std::size_t param) {
  std::lock_guard lock(mutex);
  Zero3Unit& unit = units[unit_of[param]];
  if (unit.pending > 0 && --unit.pending > 0) return;
  release(unit_of[param]);
  unit.pending = unit.layout.params.size();
}

void Zero3::Impl::install_hooks() {
  for (std::size_t i = 0; i < params.size(); ++i) {
    // The parameter holds its accumulator weakly: keep it alive so the hook survives.
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    auto hook = std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const variable_list& outputs, const variable_list&) {
          gradient_arrived(i);
          return outputs;
        });
    hook_keys.push_back(acc->add_post_hook(std::move(hook)));
    accumulators.push_back(std::move(acc));
  }
}

at::Tensor Zero3::run_unit(std::size_t unit, const at::Tensor& input,
                           const std::function<at::Tensor(const at::Tensor&)>& body) {
  Impl& impl = *impl_;
  require_argument(unit < impl.units.size(), "Zero3::run_unit: unit " + std::to_string(unit) +
                                                 " of " + std::to_string(impl.units.size()));
  // Without gradient recording (evaluation) no backward follows: the call is none of the
  // step's (it neither prefetches nor shapes the next step's prefetch order) and the unit is
  // freed after its forward.
  const bool recording = at::GradMode::is_enabled();
  std::size_t call = 0;
  {
    std::lock_guard lock(impl.mutex);
    call = impl.calls.size();
    if (recording) impl.calls.push_back(unit);
    impl.ensure_gathered(unit);
    if (recording) impl.prefetch_forward(call);
  }
  at::Tensor out = body(input);
  if (impl.options.reshard_after_forward || !recording) {
    std::lock_guard lock(impl.mutex);
    impl.release(unit);
  }
  if (!out.requires_grad()) return out;
  return UnitOutput::apply(out, reinterpret_cast<std::int64_t>(impl_.get()),
                           static_cast<std::int64_t>(call));
}

std::vector<at::Tensor> Zero3::full_parameters() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  std::vector<at::Tensor> out(impl.params.size());
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < impl.units.size(); ++k) {
    const bool was_free = impl.units[k].state == State::Free;
    impl.ensure_gathered(k);
    const at::Tensor flat = impl.flat_view(impl.units[k]);
    const BucketLayout& layout = impl.units[k].layout;
    for (std::size_t j = 0; j < layout.params.size(); ++j) {
      const at::Tensor& param = impl.params[layout.params[j]];
      out[layout.params[j]] =
          flat.narrow(0, layout.offsets[j], param.numel()).view(param.sizes()).clone();
    }
    if (was_free) impl.release(k);
  }
  return out;
}

}  // namespace chorus::train
