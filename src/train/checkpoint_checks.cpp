// Checks made before a checkpoint is written or loaded (see checkpoint_checks.hpp).
#include "checkpoint_checks.hpp"

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

Error refuse(const std::string& sentence) {
  return Error(Status::InvalidArgument, "load_checkpoint: " + sentence);
}

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

/// Throws unless `archive` holds tensor `name` with `want`'s shape and dtype.
void check_tensor(torch::serialize::InputArchive& archive, const std::string& name,
                  const std::string& full_name, const torch::Tensor& want,
                  const std::string& path) {
  torch::Tensor saved;
  if (!archive.try_read(name, saved)) {
    throw refuse(path + " has no tensor " + full_name + " (the model's has shape " +
                 shape_of(want) + ")");
  }
  if (!saved.sizes().equals(want.sizes())) {
    throw refuse(path + " holds " + full_name + " with shape " + shape_of(saved) +
                 ", the model's " + full_name + " has shape " + shape_of(want));
  }
  if (saved.scalar_type() != want.scalar_type()) {
    throw refuse(path + " holds " + full_name + " as " +
                 std::string(c10::toString(saved.scalar_type())) + ", the model's is " +
                 std::string(c10::toString(want.scalar_type())));
  }
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

void check_fits(torch::serialize::InputArchive& archive, torch::nn::Module& module,
                const std::string& prefix, const std::string& path) {
  std::set<std::string> known;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    known.insert(p.key());
    check_tensor(archive, p.key(), prefix + p.key(), p.value(), path);
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    known.insert(b.key());
    check_tensor(archive, b.key(), prefix + b.key(), b.value(), path);
  }
  for (const auto& child : module.named_children()) {
    known.insert(child.key());
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      throw refuse(path + " has no module " + prefix + child.key());
    }
    check_fits(child_archive, *child.value(), prefix + child.key() + ".", path);
  }
  for (const auto& key : archive.keys()) {
    if (known.count(key) == 0) {
      throw refuse(path + " holds " + prefix + key + ", which the model does not have");
    }
  }
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
