// Checkpoints: one torch archive holding the module's parameters and buffers ("model"), the
// optimizer's state ("optimizer") and the TrainingState ("state"). Rank 0 writes path + ".tmp"
// and renames it over path, so a reader sees either the previous or the new complete file.
#include <chorus/error.hpp>
#include <chorus/train/ddp.hpp>

#include <torch/torch.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace chorus::train {
namespace {

torch::Tensor scalar(std::int64_t v) { return torch::tensor(v, torch::kLong); }

// Archive entry names must be identifiers (no '.'); extra keys are stored hex-encoded.
std::string encode_key(const std::string& key) {
  static const char* digits = "0123456789abcdef";
  std::string out = "k";
  for (unsigned char c : key) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string decode_key(const std::string& name) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error(Status::SystemError, "load_checkpoint: malformed extra key '" + name + "'");
  };
  if (name.empty() || name[0] != 'k' || name.size() % 2 != 1) nibble('?');
  std::string out;
  for (std::size_t i = 1; i < name.size(); i += 2) {
    out += static_cast<char>(nibble(name[i]) * 16 + nibble(name[i + 1]));
  }
  return out;
}

std::int64_t read_scalar(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  if (!archive.try_read(key, t) || t.numel() != 1 || t.scalar_type() != torch::kLong) {
    throw Error(Status::SystemError, "load_checkpoint: missing or malformed entry '" + key + "'");
  }
  return t.item<std::int64_t>();
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const TrainingState& state,
                     const chorus::Communicator& comm) {
  require_argument(!path.empty(), "save_checkpoint: empty path");
  std::string failure;
  if (comm.rank() == 0) {
    try {
      torch::serialize::OutputArchive root;
      torch::serialize::OutputArchive model_archive;
      model.save(model_archive);
      root.write("model", model_archive);
      torch::serialize::OutputArchive opt_archive;
      opt.save(opt_archive);
      root.write("optimizer", opt_archive);
      torch::serialize::OutputArchive state_archive;
      state_archive.write("step", scalar(state.step));
      state_archive.write("epoch", scalar(state.epoch));
      torch::serialize::OutputArchive extra_archive;
      for (const auto& [key, value] : state.extra)
        extra_archive.write(encode_key(key), scalar(value));
      state_archive.write("extra", extra_archive);
      root.write("state", state_archive);
      const std::string tmp = path + ".tmp";
      root.save_to(tmp);
      if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        failure = "rename " + tmp + " -> " + path + ": " + std::strerror(errno);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Every rank learns whether rank 0 succeeded, so all throw or all return together.
  std::int32_t ok = failure.empty() ? 1 : 0;
  chorus::Communicator c = comm;
  c.broadcast(&ok, &ok, 1, DataType::Int32, 0);
  if (ok == 0) {
    throw Error(Status::SystemError, "save_checkpoint(" + path + ") failed on rank 0" +
                                         (failure.empty() ? std::string() : ": " + failure));
  }
}

TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& opt) {
  torch::serialize::InputArchive root;
  try {
    root.load_from(path);
  } catch (const std::exception& e) {
    throw Error(Status::SystemError, "load_checkpoint: cannot read " + path + ": " + e.what());
  }
  torch::serialize::InputArchive model_archive;
  torch::serialize::InputArchive opt_archive;
  torch::serialize::InputArchive state_archive;
  if (!root.try_read("model", model_archive) || !root.try_read("optimizer", opt_archive) ||
      !root.try_read("state", state_archive)) {
    throw Error(Status::SystemError, "load_checkpoint: " + path + " is not a Chorus checkpoint");
  }
  try {
    model.load(model_archive);
    opt.load(opt_archive);
  } catch (const c10::Error& e) {
    throw Error(Status::SystemError,
                "load_checkpoint: " + path +
                    " does not match the model or optimizer: " + e.what_without_backtrace());
  }
  TrainingState state;
  state.step = read_scalar(state_archive, "step");
  state.epoch = read_scalar(state_archive, "epoch");
  torch::serialize::InputArchive extra_archive;
  if (state_archive.try_read("extra", extra_archive)) {
    for (const auto& key : extra_archive.keys())
      state.extra[decode_key(key)] = read_scalar(extra_archive, key);
  }
  return state;
}

}  // namespace chorus::train
