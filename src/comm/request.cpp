// Request: wait/test on the executor that owns the operation.
#include "comm/executor.hpp"

#include <chorus/communicator.hpp>

namespace chorus {
namespace {

void throw_if_failed(const detail::RequestState& state) {
  if (state.status != Status::Success) throw Error(state.status, state.message);
}

/// The executor, or nullptr once the communicator drained every operation and went away.
std::shared_ptr<detail::Executor> executor_of(const detail::RequestState& state) {
  return state.executor.lock();
}

void require_valid(const std::shared_ptr<detail::RequestState>& state) {
  if (!state) throw Error(Status::InvalidArgument, "the request handle is empty");
}

}  // namespace

void Request::wait() {
  require_valid(state_);
  if (auto executor = executor_of(*state_)) executor->wait(*state_, std::nullopt);
  throw_if_failed(*state_);
}

bool Request::wait_for(std::chrono::milliseconds timeout) {
  require_valid(state_);
  if (auto executor = executor_of(*state_)) {
    if (!executor->wait(*state_, timeout)) return false;
  }
  throw_if_failed(*state_);
  return true;
}

int Request::source() const {
  if (!state_) return -1;
  if (auto executor = executor_of(*state_)) {
    if (!executor->test(*state_)) return -1;  // also orders the read after completion
  }
  return state_->status == Status::Success ? state_->source : -1;
}

bool Request::test() {
  require_valid(state_);
  if (auto executor = executor_of(*state_)) {
    if (!executor->test(*state_)) return false;
  }
  throw_if_failed(*state_);
  return true;
}

}  // namespace chorus
