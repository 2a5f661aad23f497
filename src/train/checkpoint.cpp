// Checkpoints of a torch::nn::Module and its optimizer in the shared format
// (checkpoint_format.hpp): every parameter and buffer is a tensor under its dotted name
// ("0.weight"), whole; the optimizer's state is one uint8 tensor, "optimizer.torch", holding
// its torch archive (the state of a replicated optimizer, in parameter order); the model
// description lists the module's submodules ("modules") and the optimizer's type
// ("optimizer"). The replicas of data-parallel training hold the same tensors, so rank 0
// passes the pieces and writes them.
#include "checkpoint/save.hpp"
#include "checkpoint/settings.hpp"
#include "checkpoint_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/checkpoint_format.hpp>

#include <torch/torch.h>

#include <filesystem>

namespace chorus::train {
namespace {

constexpr const char* kOptimizerTensor = "optimizer.torch";

/// The module's parameters and buffers by dotted name, parameters first.
std::vector<std::pair<std::string, torch::Tensor>> module_tensors(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

/// The optimizer's torch archive as a uint8 tensor.
torch::Tensor optimizer_bytes(torch::optim::Optimizer& opt) {
  torch::serialize::OutputArchive archive;
  opt.save(archive);
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return torch::from_blob(bytes.data(), {static_cast<std::int64_t>(bytes.size())}, torch::kUInt8)
      .clone();
}

TensorPiece whole(const std::string& name, const torch::Tensor& t, int ranks) {
  return {
      name, t.sizes().vec(), t.scalar_type(), {Placement::replicate("dp", 0, ranks)}, t.detach()};
}

Error refused(const Error& e) {
  return Error(e.status(), "load_checkpoint: " + std::string(e.what()));
}

/// Fills the model's tensors and the optimizer from the checkpoint, after load_tensor_checkpoint
/// has checked every tensor: nothing is changed when a check fails.
void load_checked(const std::string& path, const CheckpointListing& listing,
                  torch::nn::Module& model, torch::optim::Optimizer& opt) {
  const auto tensors = module_tensors(model);
  std::vector<TensorPiece> targets;
  for (const auto& [name, t] : tensors)
    targets.push_back({name, t.sizes().vec(), t.scalar_type(), {}, {}});
  std::vector<std::int64_t> archive_shape;
  for (const SavedTensor& t : listing.tensors)
    if (t.name == kOptimizerTensor) archive_shape = t.global_shape;
  targets.push_back({kOptimizerTensor, archive_shape, torch::kUInt8, {}, {}});
  try {
    load_tensor_checkpoint(path, targets);
  } catch (const Error& e) {
    throw refused(e);
  }
  const torch::Tensor& bytes = targets.back().data;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(static_cast<const char*>(bytes.data_ptr()),
                      static_cast<std::size_t>(bytes.numel()));
    opt.load(archive);
  } catch (const c10::Error& e) {
    throw Error(Status::InvalidArgument,
                "load_checkpoint: " + path +
                    " does not match the optimizer: " + e.what_without_backtrace());
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].second.copy_(targets[i].data);
}

}  // namespace

void check_checkpoint_path(const std::string& path, const chorus::Communicator& comm) {
  std::optional<Error> failure;
  if (comm.rank() == 0) {
    if (auto problem = detail::path_problem(path)) {
      failure =
          Error(Status::InvalidArgument, "checkpoint " + path + " cannot be written: " + *problem);
    }
  }
  detail::raise_if_any_failed(comm, failure);
}

void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const TrainingState& state,
                     const chorus::Communicator& comm) {
  std::vector<TensorPiece> pieces;
  CheckpointHeader header{state, {}};
  std::optional<Error> failure;
  if (comm.rank() == 0) {
    failure = detail::failure_of(
        [&] {
          for (const auto& [name, t] : module_tensors(model))
            pieces.push_back(whole(name, t, comm.size()));
          pieces.push_back(whole(kOptimizerTensor, optimizer_bytes(opt), comm.size()));
          header.model = {{"modules", detail::module_names(model)},
                          {"optimizer", detail::optimizer_type(opt)}};
        },
        Status::SystemError);
    if (failure) {
      failure = Error(failure->status(),
                      "save_checkpoint(" + path + ") failed on rank 0: " + failure->what());
    }
  }
  detail::raise_if_any_failed(comm, failure);
  detail::save_pieces("save_checkpoint", path, pieces, header, comm);
}

TrainingState read_checkpoint_state(const std::string& path) {
  return read_tensor_checkpoint(path).header.state;
}

TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& opt) {
  const CheckpointListing listing = read_tensor_checkpoint(path);
  std::vector<std::string> saved;
  for (const SavedTensor& t : listing.tensors)
    if (t.name != kOptimizerTensor) saved.push_back(t.name);
  std::vector<std::string> ours;
  for (const auto& entry : module_tensors(model)) ours.push_back(entry.first);
  try {
    detail::check_structure(listing.header.model, detail::module_names(model), saved, ours, path);
    detail::check_optimizer_type(listing.header.model, opt, path);
  } catch (const Error& e) {
    throw refused(e);
  }
  load_checked(path, listing, model, opt);
  return listing.header.state;
}

std::string config_difference(const std::string& path, const RunConfig& saved,
                              const RunConfig& current) {
  if (saved.empty() && !current.empty()) {
    return "checkpoint " + path +
           " records no settings to compare with this run's (it was written without them)";
  }
  const auto [before, now] = detail::differing_settings(saved, current);
  if (before.empty()) return "";
  return "checkpoint " + path + " was made with " + before + ", this run has " + now;
}

std::optional<TrainingState> resume_checkpoint(const std::string& path, torch::nn::Module& model,
                                               torch::optim::Optimizer& opt,
                                               const RunConfig& config,
                                               const chorus::Communicator& comm) {
  return detail::resume_with(path, config, comm, [&] { return load_checkpoint(path, model, opt); });
}

namespace detail {

std::string module_names(torch::nn::Module& model) {
  std::string out;
  for (const auto& m : model.named_modules("", /*include_self=*/false)) {
    out += (out.empty() ? "" : " ") + m.key();
  }
  return out;
}

std::optional<TrainingState> resume_with(const std::string& path, const RunConfig& config,
                                         const chorus::Communicator& comm,
                                         const std::function<TrainingState()>& load) {
  // Rank 0 decides whether there is a checkpoint; every rank must then be able to read it.
  std::int32_t found = comm.rank() == 0 && std::filesystem::exists(path) ? 1 : 0;
  chorus::Communicator c = comm;
  c.broadcast(&found, &found, 1, DataType::Int32, 0);
  if (found == 0) return std::nullopt;
  // First every rank compares the configuration, so a refusal leaves every model untouched.
  raise_if_any_failed(comm, failure_of(
                                [&] {
                                  const std::string difference = config_difference(
                                      path, read_checkpoint_state(path).config, config);
                                  require_argument(difference.empty(), difference);
                                },
                                Status::SystemError));
  TrainingState state;
  raise_if_any_failed(comm, failure_of([&] { state = load(); }, Status::SystemError));
  return state;
}

}  // namespace detail

}  // namespace chorus::train
