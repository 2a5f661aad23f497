#include "comm/executor.hpp"

#include <chorus/error.hpp>

#include <new>

namespace chorus::detail {

std::shared_ptr<Executor> Executor::create(FailureHook on_failure) {
  std::shared_ptr<Executor> executor(new Executor(std::move(on_failure)));
  executor->worker_ = std::thread([raw = executor.get()] { raw->worker_loop(); });
  return executor;
}

Executor::~Executor() { drain_and_stop(); }

std::shared_ptr<RequestState> Executor::submit(Work work) {
  auto request = std::make_shared<RequestState>();
  request->executor = weak_from_this();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Error(Status::InvalidUsage, "the communicator has been destroyed");
    queue_.push_back(Item{std::move(work), request});
  }
  changed_.notify_all();
  return request;
}

bool Executor::run_head(std::unique_lock<std::mutex>& lock) {
  if (running_ || queue_.empty()) return false;
  Item item = std::move(queue_.front());
  queue_.pop_front();
  running_ = true;
  lock.unlock();
  Status status = Status::Success;
  std::string message;
  try {
    item.work();
  } catch (const Error& e) {
    status = e.status();
    message = e.what();
  } catch (const std::bad_alloc&) {
    status = Status::SystemError;
    message = "out of memory";
  } catch (const std::exception& e) {
    status = Status::InternalError;
    message = std::string("internal error: ") + e.what();
  }
  if (status != Status::Success && on_failure_) on_failure_(status, message);
  lock.lock();
  item.request->status = status;
  item.request->message = std::move(message);
  item.request->done = true;
  running_ = false;
  changed_.notify_all();
  return true;
}

void Executor::worker_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || (!running_ && !queue_.empty()); });
    if (run_head(lock)) continue;
    if (stopping_ && queue_.empty() && !running_) return;
  }
}

bool Executor::wait(RequestState& request, std::optional<std::chrono::milliseconds> timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::hours(24 * 365));
  std::unique_lock lock(mutex_);
  while (!request.done) {
    // Only an unbounded wait helps: running an operation inline could outlast `timeout`.
    if (!timeout && run_head(lock)) continue;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !request.done) {
      return false;
    }
  }
  return true;
}

bool Executor::test(RequestState& request) {
  std::lock_guard lock(mutex_);
  return request.done;
}

void Executor::drain_and_stop() {
  std::unique_lock lock(mutex_);
  if (!worker_.joinable()) return;
  stopping_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return queue_.empty() && !running_; });
  lock.unlock();
  worker_.join();
}

}  // namespace chorus::detail
