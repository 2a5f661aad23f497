// Saving and loading a module with its ShardedState; see sharded_checkpoint.hpp.
//
// A load first computes every target piece (the parameters this rank holds whole, or its spans
// of them; the optimizer's slots and steps for its spans; the module's other tensors whole),
// reads them all with one load_tensor_checkpoint (which checks and reads everything before it
// returns), checks that each holder's spans agree on their step, and only then assigns.
#include "../checkpoint/save.hpp"
#include "../checkpoint/settings.hpp"
#include "../checkpoint_checks.hpp"
#include "sharded_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/sharded_checkpoint.hpp>

#include <torch/torch.h>

#include <functional>
#include <set>

namespace chorus::train {
namespace {

constexpr const char* kArchiveTensor = "optimizer.torch";  // save_checkpoint's optimizer

bool is_optimizer_tensor(const std::string& name) { return name.rfind("optimizer/", 0) == 0; }

/// Tensors a ShardedState does not hold (a module's buffers, its untrained parameters), by name.
using OtherTensors = std::vector<std::pair<std::string, at::Tensor>>;

OtherTensors other_tensors(torch::nn::Module& model, const ShardedState& s) {
  std::set<std::string> held;
  for (const TensorPiece& p : s.parameters) held.insert(p.name);
  OtherTensors out;
  for (const auto& p : model.named_parameters())
    if (held.count(p.key()) == 0) out.emplace_back(p.key(), p.value().detach());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value().detach());
  return out;
}

/// Which targets a load of a ShardedState reads, and where each goes.
struct StateLoad {
  detail::SlotKind kind;
  std::vector<TensorPiece> targets;
  std::vector<std::ptrdiff_t> whole;   ///< per parameter: its whole-tensor target, or -1
  std::vector<std::ptrdiff_t> values;  ///< per span: its values' target, or -1
  std::vector<std::ptrdiff_t> slots;   ///< per span: its first slot target, or -1
  std::vector<std::vector<std::size_t>> spans_of;  ///< per holder: its spans
};

/// Whether the checkpoint holds optimizer state for each holder: all of its spans' parameters
/// or none (InvalidArgument naming both when they differ).
std::vector<bool> holders_with_state(const std::string& path, const CheckpointListing& listing,
                                     const ShardedState& s, const StateLoad& load) {
  std::set<std::string> saved;
  for (const SavedTensor& t : listing.tensors) saved.insert(t.name);
  const std::string first_slot = load.kind.has_step        ? "step"
                                 : load.kind.slots.empty() ? ""
                                                           : load.kind.slots.front();
  std::vector<bool> out;
  for (const std::vector<std::size_t>& spans : load.spans_of) {
    std::string with, without;
    for (std::size_t i : spans) {
      const std::string& name = s.parameters[s.spans[i].parameter].name;
      const bool has = !first_slot.empty() && saved.count(detail::slot_name(first_slot, name)) > 0;
      (has ? with : without) = name;
    }
    require_argument(with.empty() || without.empty(),
                     "checkpoint " + path + " holds optimizer state for " + with + " but not for " +
                         without + ", which this rank's optimizer keeps in one tensor");
    out.push_back(!with.empty());
  }
  return out;
}

StateLoad plan_load(const std::string& path, const CheckpointListing& listing,
                    const ShardedState& s) {
  require_argument(s.optimizer != nullptr, "load_sharded_checkpoint: the state has no optimizer");
  StateLoad load{detail::slot_kind(*s.optimizer), {}, {}, {}, {}, {}};
  load.spans_of.resize(s.holders.size());
  for (std::size_t i = 0; i < s.spans.size(); ++i) load.spans_of.at(s.spans[i].holder).push_back(i);
  for (std::size_t k = 0; k < s.parameters.size(); ++k) {
    const TensorPiece& p = s.parameters[k];
    const bool whole = p.data.defined();
    load.whole.push_back(whole ? static_cast<std::ptrdiff_t>(load.targets.size()) : -1);
    if (whole) load.targets.push_back({p.name, p.global_shape, p.dtype, p.placements, {}});
  }
  const std::vector<bool> with_state = holders_with_state(path, listing, s, load);
  for (const FlatSpan& span : s.spans) {
    const TensorPiece& p = s.parameters[span.parameter];
    const std::vector<Placement> cut = detail::span_placements(s, p, span);
    detail::holder_range(s, span, s.holders[span.holder]);  // refuses a span outside them
    const auto target = [&](const std::string& name) {
      load.targets.push_back({name, p.global_shape, p.dtype, cut, {}});
      return static_cast<std::ptrdiff_t>(load.targets.size() - 1);
    };
    load.values.push_back(load.whole[span.parameter] < 0 ? target(p.name) : -1);
    if (!with_state[span.holder]) {
      load.slots.push_back(-1);
      continue;
    }
    load.slots.push_back(static_cast<std::ptrdiff_t>(load.targets.size()));
    for (const std::string& slot : load.kind.slots) target(detail::slot_name(slot, p.name));
    if (load.kind.has_step) {
      load.targets.push_back(
          {detail::slot_name("step", p.name), {}, at::kLong, detail::step_placements(s, p), {}});
    }
  }
  return load;
}

/// Each holder's optimizer state assembled from the loaded targets (nullopt: none); refuses
/// spans of one holder saved at different steps.
std::vector<std::optional<detail::SlotValues>> assemble_slots(const std::string& path,
                                                              const ShardedState& s,
                                                              const StateLoad& load) {
  std::vector<std::optional<detail::SlotValues>> out(s.holders.size());
  for (std::size_t h = 0; h < s.holders.size(); ++h) {
    const std::vector<std::size_t>& spans = load.spans_of[h];
    if (spans.empty() || load.slots[spans.front()] < 0) continue;
    detail::SlotValues values;
    for (std::size_t i = 0; i < load.kind.slots.size(); ++i) {
      values.tensors.push_back(at::zeros_like(s.holders[h].detach()));
    }
    std::string first;
    for (std::size_t i : spans) {
      const auto slot = static_cast<std::size_t>(load.slots[i]);
      for (std::size_t j = 0; j < load.kind.slots.size(); ++j) {
        detail::holder_range(s, s.spans[i], values.tensors[j])
            .copy_(load.targets[slot + j].data.reshape(-1));
      }
      if (!load.kind.has_step) continue;
      const std::int64_t step =
          load.targets[slot + load.kind.slots.size()].data.item<std::int64_t>();
      const std::string& name = s.parameters[s.spans[i].parameter].name;
      require_argument(first.empty() || step == values.step,
                       "checkpoint " + path + " holds step " + std::to_string(values.step) +
                           " for " + first + " and step " + std::to_string(step) + " for " + name +
                           ", which this rank's optimizer keeps in one tensor");
      if (first.empty()) first = name;
      values.step = step;
    }
    out[h] = std::move(values);
  }
  return out;
}

/// The loaded values of span `i`: its own target's, or its range of its parameter's whole one.
at::Tensor span_values(const StateLoad& load, const ShardedState& s, std::size_t i) {
  if (load.values[i] >= 0) {
    return load.targets[static_cast<std::size_t>(load.values[i])].data.reshape(-1);
  }
  const FlatSpan& span = s.spans[i];
  const std::ptrdiff_t whole = load.whole[span.parameter];
  return load.targets[static_cast<std::size_t>(whole)].data.reshape(-1).narrow(
      0, span.parameter_offset, span.length);
}

/// Writes the loaded parameters and optimizer state into `s` (nothing here can be refused).
/// Every holder range gets its span's values, also where the parameter was loaded whole: a
/// holder that is not the parameter's own memory (mixed precision's fp32 masters beside the
/// half parameters) would otherwise keep its old values.
void assign(const StateLoad& load, ShardedState& s,
            const std::vector<std::optional<detail::SlotValues>>& slots) {
  for (std::size_t k = 0; k < s.parameters.size(); ++k) {
    if (load.whole[k] >= 0) {
      s.parameters[k].data.detach().copy_(
          load.targets[static_cast<std::size_t>(load.whole[k])].data);
    }
  }
  for (std::size_t i = 0; i < s.spans.size(); ++i) {
    detail::holder_range(s, s.spans[i], s.holders[s.spans[i].holder].detach())
        .copy_(span_values(load, s, i));
  }
  for (std::size_t h = 0; h < s.holders.size(); ++h) {
    detail::write_slots(*s.optimizer, load.kind, s.holders[h], slots[h]);
  }
}

Error refused(const Error& e) {
  return Error(e.status(), "load_sharded_checkpoint: " + std::string(e.what()));
}

/// Collective: saves `state`'s pieces and `others` (replicated, written once) with `training`
/// and `description` plus the optimizer's type.
void save_state(const std::string& path, const ShardedState& state, RunConfig description,
                const std::function<OtherTensors()>& others, const TrainingState& training,
                const chorus::Communicator& comm) {
  std::vector<TensorPiece> pieces;
  CheckpointHeader header{training, std::move(description)};
  std::optional<Error> failure = detail::failure_of(
      [&] {
        pieces = sharded_state_pieces(state);
        for (const auto& [name, t] : others()) {
          pieces.push_back({name,
                            t.sizes().vec(),
                            t.scalar_type(),
                            {Placement::replicate(state.mesh_dim, state.index, state.count)},
                            t});
        }
        header.model["optimizer"] = detail::optimizer_type(*state.optimizer);
      },
      Status::SystemError);
  if (failure) {
    failure = Error(failure->status(), "save_sharded_checkpoint(" + path + ") failed on rank " +
                                           std::to_string(comm.rank()) + ": " + failure->what());
  }
  detail::raise_if_any_failed(comm, failure);
  detail::save_pieces("save_sharded_checkpoint", path, pieces, header, comm);
}

/// The names of the saved tensors that are not optimizer state; refuses save_checkpoint's
/// archive format.
std::vector<std::string> saved_tensors(const std::string& path, const CheckpointListing& listing) {
  std::vector<std::string> saved;
  for (const SavedTensor& t : listing.tensors) {
    require_argument(t.name != kArchiveTensor,
                     "checkpoint " + path +
                         " holds the optimizer's state as one torch archive (save_checkpoint's);"
                         " load it with load_checkpoint");
    if (!is_optimizer_tensor(t.name)) saved.push_back(t.name);
  }
  return saved;
}

/// Local: `check_model` (on the listing) first, then the optimizer type, every piece read, and
/// only then `others` and the state assigned.
TrainingState load_state(const std::string& path, ShardedState& state, OtherTensors others,
                         const std::function<void(const CheckpointListing&)>& check_model) {
  const CheckpointListing listing = read_tensor_checkpoint(path);
  StateLoad load;
  std::vector<std::optional<detail::SlotValues>> slots;
  try {
    check_model(listing);
    detail::check_optimizer_type(listing.header.model, *state.optimizer, path);
    load = plan_load(path, listing, state);
    const std::size_t first_other = load.targets.size();
    for (const auto& [name, t] : others) {
      load.targets.push_back({name, t.sizes().vec(), t.scalar_type(), {}, {}});
    }
    load_tensor_checkpoint(path, load.targets);
    slots = assemble_slots(path, state, load);
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < others.size(); ++i) {
      others[i].second.copy_(load.targets[first_other + i].data);
    }
  } catch (const Error& e) {
    throw refused(e);
  }
  at::NoGradGuard no_grad;
  assign(load, state, slots);
  return listing.header.state;
}

}  // namespace

void save_sharded_checkpoint(const std::string& path, torch::nn::Module& model,
                             const ShardedState& state, const TrainingState& training,
                             const chorus::Communicator& comm) {
  save_state(
      path, state, {{"modules", detail::module_names(model)}},
      [&] { return other_tensors(model, state); }, training, comm);
}

void save_sharded_checkpoint(const std::string& path, const RunConfig& model,
                             const ShardedState& state, const TrainingState& training,
                             const chorus::Communicator& comm) {
  require_argument(model.count("optimizer") == 0,
                   "save_sharded_checkpoint: the model description names an \"optimizer\", "
                   "which the checkpoint records itself");
  save_state(
      path, state, model, [] { return OtherTensors{}; }, training, comm);
}

TrainingState load_sharded_checkpoint(const std::string& path, torch::nn::Module& model,
                                      ShardedState& state) {
  return load_state(path, state, other_tensors(model, state), [&](const CheckpointListing& l) {
    std::vector<std::string> ours;
    for (const auto& p : model.named_parameters()) ours.push_back(p.key());
    for (const auto& b : model.named_buffers()) ours.push_back(b.key());
    detail::check_structure(l.header.model, detail::module_names(model), saved_tensors(path, l),
                            ours, path);
  });
}

// The description first (a checkpoint of another model names what differs), then every saved
// tensor must be one of the state's parameters.
TrainingState load_sharded_checkpoint(const std::string& path, const RunConfig& model,
                                      ShardedState& state) {
  return load_state(path, state, {}, [&](const CheckpointListing& l) {
    RunConfig saved = l.header.model;
    require_argument(saved.erase("optimizer") == 1,
                     "checkpoint " + path +
                         " records no optimizer type (it was not written by "
                         "save_sharded_checkpoint)");
    const auto [before, now] = detail::differing_settings(saved, model);
    require_argument(before.empty(), "checkpoint " + path + " was saved from a model with " +
                                         before + ", this model has " + now);
    if (!state.whole_model) return;
    std::set<std::string> ours;
    for (const TensorPiece& p : state.parameters) ours.insert(p.name);
    for (const std::string& name : saved_tensors(path, l)) {
      require_argument(ours.count(name) > 0,
                       "checkpoint " + path + " holds " + name + ", which the model does not have");
    }
  });
}

std::optional<TrainingState> resume_sharded_checkpoint(const std::string& path,
                                                       torch::nn::Module& model,
                                                       ShardedState& state, const RunConfig& config,
                                                       const chorus::Communicator& comm) {
  return detail::resume_with(path, config, comm,
                             [&] { return load_sharded_checkpoint(path, model, state); });
}

std::optional<TrainingState> resume_sharded_checkpoint(const std::string& path,
                                                       const RunConfig& model, ShardedState& state,
                                                       const RunConfig& config,
                                                       const chorus::Communicator& comm) {
  return detail::resume_with(path, config, comm,
                             [&] { return load_sharded_checkpoint(path, model, state); });
}

}  // namespace chorus::train
