// What checkpoint.cpp checks before it writes or loads anything (checkpoint_checks.cpp):
// whether a path can be written, whether a checkpoint's structure fits a module, the
// optimizer's type name, and how ranks agree on a failure. Private to src/train; torch types
// are only forward-declared (checkpoint.hpp).
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/train/checkpoint.hpp>

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train::detail {

/// Why rank 0 could not create `path` ("the path is empty", "directory /x does not exist",
/// "cannot create /x/ck.pt.tmp: Permission denied", ...); nullopt when it can. Creates and
/// removes path + ".tmp" to find out (it leaves one that was there before).
std::optional<std::string> path_problem(const std::string& path);

/// Throws InvalidArgument unless a checkpoint of a module whose description is `saved_model`
/// (save_checkpoint's "modules", the submodules' dotted names) and whose tensors are `saved`
/// fits a module whose submodules are `modules` and whose tensors are `ours`: "<path> has no
/// module 3", "<path> holds 3, which the model does not have", "<path> holds 0.bias, which the
/// model does not have". A tensor the checkpoint lacks is load_tensor_checkpoint's sentence.
void check_structure(const RunConfig& saved_model, const std::string& modules,
                     const std::vector<std::string>& saved, const std::vector<std::string>& ours,
                     const std::string& path);

/// Throws InvalidArgument unless `opt` has the optimizer type `saved_model` records ("<path>
/// holds the state of a SGD optimizer, the given optimizer is Adam").
void check_optimizer_type(const RunConfig& saved_model, const torch::optim::Optimizer& opt,
                          const std::string& path);

/// "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "LBFGS", or the C++ type name of another.
std::string optimizer_type(const torch::optim::Optimizer& opt);

/// "0 1 2 3 4": the dotted names of every submodule of `model` (the "modules" a checkpoint's
/// model description records).
std::string module_names(torch::nn::Module& model);

/// resume_checkpoint's protocol with another loader: nullopt when rank 0 finds no file at
/// `path`; otherwise every rank compares the saved config with `config` (config_difference),
/// then, when no rank refused, every rank runs `load`. Any rank's failure is thrown on every
/// rank (the lowest failing rank's sentence); a refused configuration changes nothing.
std::optional<TrainingState> resume_with(const std::string& path, const RunConfig& config,
                                         const chorus::Communicator& comm,
                                         const std::function<TrainingState()>& load);

/// A one-line message: c10::Error's without its backtrace, any other exception's what().
std::string short_message(const std::exception& e);

/// Collective: `failure` is this rank's error (nullopt when it succeeded). When any rank
/// failed, every rank throws the lowest failing rank's Error (same status, same sentence).
void raise_if_any_failed(const chorus::Communicator& comm, const std::optional<Error>& failure);

/// Runs `action` and returns what it threw as an Error (nullopt when it returned): a
/// chorus::Error as is, any other exception as `status` with its short message.
template <class Action>
std::optional<Error> failure_of(Action&& action, Status status) {
  try {
    action();
    return std::nullopt;
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    return Error(status, short_message(e));
  }
}

}  // namespace chorus::train::detail
