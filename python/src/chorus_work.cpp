// ChorusWork, CompletionQueue and Watchdog: see chorus_work.hpp for the contract.
#include "chorus_work.hpp"

#include <ATen/core/ivalue.h>
#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace chorus_torch {
namespace {

/// Time left until `until`, rounded up to whole milliseconds (0 once it passed).
std::chrono::milliseconds time_left(Clock::time_point until) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

/// Joins `thread`. Its last act may be dropping a tensor that has a Python object,
/// which takes the GIL; we are usually called from Python with the GIL held
/// (destroy_process_group), so release it while joining or both wait forever.
void join_without_gil(std::thread& thread) {
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  thread.join();
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

std::exception_ptr torch_error(const std::string& message) {
  return std::make_exception_ptr(c10::Error(message, ""));
}

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, chorus::Request request,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                       std::function<void()> finish, std::shared_ptr<GroupState> group,
                       std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      finish_(std::move(finish)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      group_(std::move(group)),
      timeout_(timeout) {
  if (timeout_ != c10d::kUnsetTimeout) deadline_ = Clock::now() + timeout_;
  if (!request_.valid()) complete(nullptr);
}

void ChorusWork::complete(std::exception_ptr error) {
  {
    std::lock_guard serial(complete_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (completed_) return;
    }
    if (timeout_error_) error = timeout_error_;
    if (error) error = explain(error);
    if (!error && finish_) {
      try {
        finish_();
      } catch (...) {
        error = std::current_exception();
      }
    }
    keep_alive_.clear();
    finish(error);
  }
  // Outside the lock: future callbacks (DDP's) may wait on this work again.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// An operation the group's abort failed reports why the group was aborted.
std::exception_ptr ChorusWork::explain(std::exception_ptr error) const {
  if (error == timeout_error_) return error;
  try {
    std::rethrow_exception(error);
  } catch (const chorus::Error& e) {
    const std::string reason = group_->broken_reason();
    if (e.status() == chorus::Status::InvalidUsage && !reason.empty()) {
      return torch_error("chorus: " + c10d::opTypeToString(opType_) +
                         " failed: the process group is unusable: " + reason);
    }
  } catch (...) {
  }
  return error;
}

bool ChorusWork::isCompleted() {
  {
    std::lock_guard lock(mutex_);
    if (completed_) return true;
  }
  try {
    if (!request_.test()) return false;
    complete(nullptr);
  } catch (const std::exception&) {
    complete(std::current_exception());
  }
  return true;
}

bool ChorusWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr ChorusWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

int ChorusWork::sourceRank() const {
  TORCH_CHECK(opType_ == c10d::OpType::RECVANYSOURCE || opType_ == c10d::OpType::RECV,
              "chorus: sourceRank() is only defined for receives");
  const int source = request_.source();
  TORCH_CHECK(source >= 0, "chorus: sourceRank() needs a completed receive");
  return source;
}

std::vector<at::Tensor> ChorusWork::result() { return outputs_; }

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  // The tighter of the per-call deadline and the bound given here.
  std::optional<Clock::time_point> until = deadline_;
  std::chrono::milliseconds budget = timeout_;
  const char* which = "its per-call timeout";
  if (timeout > ::kNoTimeout && (!until || Clock::now() + timeout < *until)) {
    until = Clock::now() + timeout;
    budget = timeout;
    which = "the timeout given to wait()";
  }
  if (!wait_until(until)) expire(budget, which);
  std::lock_guard lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool ChorusWork::wait_until(std::optional<Clock::time_point> until) {
  if (!request_.valid()) return true;  // completed at construction
  try {
    if (!until) {
      request_.wait();
    } else if (!request_.wait_for(time_left(*until))) {
      return false;
    }
    complete(nullptr);
  } catch (const std::exception&) {
    complete(std::current_exception());
  }
  return true;
}

void ChorusWork::expire_per_call() {
  if (deadline_) expire(timeout_, "its per-call timeout");
}

void ChorusWork::expire(std::chrono::milliseconds budget, const char* which) {
  const std::string what = "chorus: " + c10d::opTypeToString(opType_) +
                           " did not complete within " + std::to_string(budget.count()) + " ms (" +
                           which +
                           "); the process group is aborted and every later call on it fails";
  {
    std::lock_guard serial(complete_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (completed_) return;  // it made it after all
    }
    if (!timeout_error_) timeout_error_ = torch_error(what);
  }
  group_->abort(what);
  // The abort fails the request within milliseconds; its buffers are free only then.
  wait_until(std::nullopt);
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() { return future_; }

void ChorusWork::release_resources() {
  outputs_.clear();
  keep_alive_.clear();
  finish_ = nullptr;
  future_.reset();  // a completed future holds the outputs
}

CompletionQueue::CompletionQueue() : thread_([this] { run(); }) {}

CompletionQueue::~CompletionQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  join_without_gil(thread_);
}

void CompletionQueue::push(c10::intrusive_ptr<ChorusWork> work) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(work));
  }
  changed_.notify_one();
}

void CompletionQueue::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping and drained
    c10::intrusive_ptr<ChorusWork> work = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    work->wait_until(std::nullopt);
    work.reset();  // may free tensors, which may take the GIL: not under our lock
    lock.lock();
  }
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) join_without_gil(thread_);
}

void Watchdog::watch(const c10::intrusive_ptr<ChorusWork>& work) {
  {
    std::lock_guard lock(mutex_);
    if (due_.size() >= prune_at_) {
      // Entries of works already done and dropped are dead weight until their deadline;
      // pruning when the map doubled keeps it at most twice the live works (amortised O(1)).
      std::erase_if(due_, [](const auto& entry) { return entry.second.expired(); });
      prune_at_ = std::max(kMinPrune, 2 * due_.size());
    }
    due_.emplace(*work->deadline(), c10::weak_intrusive_ptr<ChorusWork>(work));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_one();  // the new deadline may be the earliest
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (due_.empty()) {
      changed_.wait(lock);
      continue;
    }
    const auto first = due_.begin();
    if (Clock::now() < first->first) {
      changed_.wait_until(lock, first->first);
      continue;
    }
    auto weak = std::make_optional(std::move(first->second));
    due_.erase(first);
    lock.unlock();
    if (c10::intrusive_ptr<ChorusWork> work = weak->lock()) work->expire_per_call();
    weak.reset();  // may be the last reference: frees the work outside our lock
    lock.lock();
  }
}

void GroupState::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (reason_.empty()) reason_ = reason;
  comm_.abort();  // never blocks long; a no-op on an empty handle
}

chorus::Communicator& GroupState::comm(const char* op) {
  std::lock_guard lock(mutex_);
  TORCH_CHECK(reason_.empty(), "chorus: ", op, ": the process group is unusable: ", reason_);
  TORCH_CHECK(comm_, "chorus: ", op, ": the process group was destroyed");
  return comm_;
}

void GroupState::release() {
  std::lock_guard lock(mutex_);
  comm_ = chorus::Communicator();
}

std::string GroupState::broken_reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

std::string GroupState::last_algorithm() const {
  std::lock_guard lock(mutex_);
  return comm_ ? comm_.last_algorithm() : std::string();
}

}  // namespace chorus_torch
