// Failure recording and enum conversion for the C ABI (see handles.hpp).
#include <string>

#include "capi/handles.hpp"

namespace chorus::capi {
namespace {

/// The calling thread's last failure, whichever communicator it came from.
thread_local std::string t_last_error;

}  // namespace

void ErrorSlot::set(std::string_view message) {
  std::lock_guard lock(mutex_);
  message_.assign(message);
}

std::string ErrorSlot::get() const {
  std::lock_guard lock(mutex_);
  return message_;
}

chorusResult_t fail(ErrorSlot* slot, const char* function, chorusResult_t code,
                    std::string_view message) noexcept {
  try {
    std::string sentence = std::string(function) + ": ";
    sentence.append(message.empty() ? std::string_view("failed without a message") : message);
    t_last_error = sentence;
    if (slot != nullptr) slot->set(sentence);
  } catch (...) {
    // Out of memory while recording: the code still reaches the caller, and the
    // thread's sentence becomes one that needs no allocation.
    t_last_error.clear();
  }
  return code;
}

chorusResult_t not_live(const char* function, HandleState state, HandleKind kind) noexcept {
  const bool request = kind == HandleKind::Request;
  switch (state) {
    case HandleState::Null:
      return fail(nullptr, function, chorusInvalidArgument,
                  request ? "the request is NULL" : "the communicator is NULL");
    case HandleState::Stale:
      return fail(nullptr, function, chorusInvalidUsage,
                  request ? "the request was already released (by chorusWait, or by chorusTest "
                            "reporting done)"
                          : "the communicator was destroyed (chorusCommDestroy)");
    default:
      return fail(nullptr, function, chorusInvalidArgument,
                  request ? "the request is not a handle that an I-form call returned"
                          : "the communicator is not a handle that chorusCommInit, "
                            "chorusCommInitFromEnv or chorusCommSplit returned");
  }
}

const char* thread_last_error() noexcept { return t_last_error.c_str(); }

chorusResult_t to_result(Status status) noexcept {
  int value = static_cast<int>(status);
  if (value <= static_cast<int>(chorusSuccess) || value > static_cast<int>(chorusInProgress)) {
    return chorusInternalError;
  }
  return static_cast<chorusResult_t>(value);
}

DataType to_dtype(const chorusDataType_t& dtype) {
  int raw = raw_value(dtype);
  require_argument(is_valid(static_cast<DataType>(raw)),
                   "unknown data type value " + std::to_string(raw));
  return static_cast<DataType>(raw);
}

ReduceOp to_op(const chorusRedOp_t& op) {
  int raw = raw_value(op);
  require_argument(is_valid(static_cast<ReduceOp>(raw)),
                   "unknown reduction operator value " + std::to_string(raw));
  return static_cast<ReduceOp>(raw);
}

}  // namespace chorus::capi
