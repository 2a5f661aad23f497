// Checks made before a checkpoint is written or loaded (see checkpoint_checks.hpp).
#include "checkpoint_checks.hpp"

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <typeinfo>

namespace chorus::train::detail {
namespace {

/// The first of `names` that `others` lacks ("" when none).
std::string first_missing(const std::vector<std::string>& names,
                          const std::vector<std::string>& others) {
  const std::set<std::string> known(others.begin(), others.end());
  for (const std::string& name : names)
    if (known.count(name) == 0) return name;
  return "";
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

}  // namespace

std::optional<std::string> path_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "the path is empty";
  std::error_code error;
  if (fs::is_directory(path, error)) return path + " is a directory";
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, error)) return "directory " + dir.string() + " does not exist";
  if (!fs::is_directory(dir, error)) return dir.string() + " is not a directory";
  const std::string tmp = path + ".tmp";
  const bool existed = fs::exists(tmp, error);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp + ": " + std::strerror(errno);
  ::close(fd);
  if (!existed) ::unlink(tmp.c_str());
  return std::nullopt;
}

void check_structure(const RunConfig& saved_model, const std::string& modules,
                     const std::vector<std::string>& saved, const std::vector<std::string>& ours,
                     const std::string& path) {
  const auto recorded = saved_model.find("modules");
  require_argument(recorded != saved_model.end(),
                   path + " records no module structure (it was not written by save_checkpoint)");
  const std::vector<std::string> saved_modules = words(recorded->second);
  const std::vector<std::string> our_modules = words(modules);
  const std::string missing = first_missing(our_modules, saved_modules);
  require_argument(missing.empty(), path + " has no module " + missing);
  const std::string extra = first_missing(saved_modules, our_modules);
  require_argument(extra.empty(), path + " holds " + extra + ", which the model does not have");
  const std::string extra_tensor = first_missing(saved, ours);
  require_argument(extra_tensor.empty(),
                   path + " holds " + extra_tensor + ", which the model does not have");
}

void check_optimizer_type(const RunConfig& saved_model, const torch::optim::Optimizer& opt,
                          const std::string& path) {
  const auto it = saved_model.find("optimizer");
  const std::string saved = it == saved_model.end() ? "(not recorded)" : it->second;
  const std::string given = optimizer_type(opt);
  require_argument(saved == given, path + " holds the state of a " + saved +
                                       " optimizer, the given optimizer is " + given);
}

std::string optimizer_type(const torch::optim::Optimizer& opt) {
  namespace optim = torch::optim;
  if (dynamic_cast<const optim::SGD*>(&opt)) return "SGD";
  if (dynamic_cast<const optim::Adam*>(&opt)) return "Adam";
  if (dynamic_cast<const optim::AdamW*>(&opt)) return "AdamW";
  if (dynamic_cast<const optim::Adagrad*>(&opt)) return "Adagrad";
  if (dynamic_cast<const optim::RMSprop*>(&opt)) return "RMSprop";
  if (dynamic_cast<const optim::LBFGS*>(&opt)) return "LBFGS";
  return typeid(opt).name();
}

std::string short_message(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

void raise_if_any_failed(const chorus::Communicator& comm, const std::optional<Error>& failure) {
  chorus::Communicator c = comm;
  std::int64_t first = failure ? c.rank() : c.size();
  c.all_reduce(&first, &first, 1, DataType::Int64, ReduceOp::Min);
  if (first == c.size()) return;
  const int root = static_cast<int>(first);
  std::string message = failure ? failure->what() : "";
  std::array<std::int64_t, 2> head = {failure ? static_cast<std::int64_t>(failure->status()) : 0,
                                      static_cast<std::int64_t>(message.size())};
  c.broadcast(head.data(), head.data(), head.size(), DataType::Int64, root);
  message.resize(static_cast<std::size_t>(head[1]));
  c.broadcast(message.data(), message.data(), message.size(), DataType::Uint8, root);
  throw Error(static_cast<Status>(head[0]), message);
}

}  // namespace chorus::train::detail
