// Checkpoints: one torch archive holding the module's parameters and buffers ("model"), the
// optimizer's state ("optimizer") and the TrainingState with the optimizer's type and the
// run's configuration ("state"). Rank 0 writes path + ".tmp" and renames it over path, so a
// reader sees either the previous or the new complete file.
#include "checkpoint/settings.hpp"
#include "checkpoint_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint.hpp>

#include <torch/torch.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace chorus::train {
namespace {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

torch::Tensor scalar(std::int64_t v) { return torch::tensor(v, torch::kLong); }

Error malformed(const std::string& path, const std::string& what) {
  return Error(Status::SystemError, "load_checkpoint: " + path + ": " + what);
}

// Archive entry names must be identifiers (no '.'); extra and config keys are hex-encoded.
std::string encode_key(const std::string& key) {
  static const char* digits = "0123456789abcdef";
  std::string out = "k";
  for (unsigned char c : key) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string decode_key(const std::string& name, const std::string& path) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw malformed(path, "malformed key '" + name + "'");
  };
  if (name.empty() || name[0] != 'k' || name.size() % 2 != 1) nibble('?');
  std::string out;
  for (std::size_t i = 1; i < name.size(); i += 2) {
    out += static_cast<char>(nibble(name[i]) * 16 + nibble(name[i + 1]));
  }
  return out;
}

std::int64_t read_scalar(InputArchive& archive, const std::string& key, const std::string& path) {
  torch::Tensor t;
  if (!archive.try_read(key, t) || t.numel() != 1 || t.scalar_type() != torch::kLong) {
    throw malformed(path, "missing or malformed entry '" + key + "'");
  }
  return t.item<std::int64_t>();
}

std::string read_string(InputArchive& archive, const std::string& key, const std::string& path) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isString()) {
    throw malformed(path, "missing or malformed entry '" + key + "'");
  }
  return value.toStringRef();
}

void write_state(OutputArchive& archive, const TrainingState& state, const std::string& optimizer) {
  archive.write("step", scalar(state.step));
  archive.write("epoch", scalar(state.epoch));
  archive.write("optimizer_type", c10::IValue(optimizer));
  OutputArchive extra;
  for (const auto& [key, value] : state.extra) extra.write(encode_key(key), scalar(value));
  archive.write("extra", extra);
  OutputArchive config;
  for (const auto& [key, value] : state.config) config.write(encode_key(key), c10::IValue(value));
  archive.write("config", config);
}

/// A checkpoint's three parts, read from its file.
struct Archives {
  InputArchive model;
  InputArchive optimizer;
  InputArchive state;
};

Archives open_checkpoint(const std::string& path) {
  InputArchive root;
  try {
    root.load_from(path);
  } catch (const std::exception& e) {
    throw Error(Status::SystemError,
                "load_checkpoint: cannot read " + path + ": " + detail::short_message(e));
  }
  Archives parts;
  if (!root.try_read("model", parts.model) || !root.try_read("optimizer", parts.optimizer) ||
      !root.try_read("state", parts.state)) {
    throw Error(Status::SystemError, "load_checkpoint: " + path + " is not a Chorus checkpoint");
  }
  return parts;
}

/// The state part; checkpoints written before the configuration was recorded have none.
TrainingState read_state(InputArchive& archive, const std::string& path) {
  TrainingState state;
  state.step = read_scalar(archive, "step", path);
  state.epoch = read_scalar(archive, "epoch", path);
  InputArchive extra;
  if (archive.try_read("extra", extra)) {
    for (const auto& key : extra.keys())
      state.extra[decode_key(key, path)] = read_scalar(extra, key, path);
  }
  InputArchive config;
  if (archive.try_read("config", config)) {
    for (const auto& key : config.keys())
      state.config[decode_key(key, path)] = read_string(config, key, path);
  }
  return state;
}

void check_optimizer_type(InputArchive& state, const torch::optim::Optimizer& opt,
                          const std::string& path) {
  c10::IValue saved;
  if (!state.try_read("optimizer_type", saved)) return;  // not recorded: Optimizer::load checks
  const std::string given = detail::optimizer_type(opt);
  if (!saved.isString() || saved.toStringRef() != given) {
    throw Error(Status::InvalidArgument, "load_checkpoint: " + path + " holds the state of a " +
                                             (saved.isString() ? saved.toStringRef() : "?") +
                                             " optimizer, the given optimizer is " + given);
  }
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
  require_argument(!path.empty(), "save_checkpoint: empty path");
  std::optional<Error> failure;
  if (comm.rank() == 0) {
    failure = detail::failure_of(
        [&] {
          OutputArchive root;
          OutputArchive model_archive;
          model.save(model_archive);
          root.write("model", model_archive);
          OutputArchive opt_archive;
          opt.save(opt_archive);
          root.write("optimizer", opt_archive);
          OutputArchive state_archive;
          write_state(state_archive, state, detail::optimizer_type(opt));
          root.write("state", state_archive);
          const std::string tmp = path + ".tmp";
          root.save_to(tmp);
          if (std::rename(tmp.c_str(), path.c_str()) != 0) {
            throw Error(Status::SystemError,
                        "rename " + tmp + " -> " + path + ": " + std::strerror(errno));
          }
        },
        Status::SystemError);
    if (failure) {
      failure = Error(failure->status(), "save_checkpoint(" + path +
                                             ") failed on rank 0: " + std::string(failure->what()));
    }
  }
  // Every rank learns whether rank 0 succeeded, so all throw or all return together.
  detail::raise_if_any_failed(comm, failure);
}

TrainingState read_checkpoint_state(const std::string& path) {
  Archives parts = open_checkpoint(path);
  return read_state(parts.state, path);
}

TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& opt) {
  Archives parts = open_checkpoint(path);
  TrainingState state = read_state(parts.state, path);
  detail::check_fits(parts.model, model, "", path);
  check_optimizer_type(parts.state, opt, path);
  try {
    model.load(parts.model);
    opt.load(parts.optimizer);
  } catch (const c10::Error& e) {
    throw Error(Status::InvalidArgument,
                "load_checkpoint: " + path +
                    " does not match the model or optimizer: " + e.what_without_backtrace());
  }
  return state;
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
  // Rank 0 decides whether there is a checkpoint; every rank must then be able to read it.
  std::int32_t found = comm.rank() == 0 && std::filesystem::exists(path) ? 1 : 0;
  chorus::Communicator c = comm;
  c.broadcast(&found, &found, 1, DataType::Int32, 0);
  if (found == 0) return std::nullopt;
  // First every rank compares the configuration, so a refusal leaves every model untouched.
  detail::raise_if_any_failed(comm, detail::failure_of(
                                        [&] {
                                          const std::string difference = config_difference(
                                              path, read_checkpoint_state(path).config, config);
                                          require_argument(difference.empty(), difference);
                                        },
                                        Status::SystemError));
  TrainingState state;
  detail::raise_if_any_failed(
      comm,
      detail::failure_of([&] { state = load_checkpoint(path, model, opt); }, Status::SystemError));
  return state;
}

}  // namespace chorus::train
