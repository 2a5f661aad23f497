// The ordered operation queue of one communicator.
//
// Operations run one at a time, in the order they were submitted. A worker
// thread runs them in the background (so non-blocking calls make progress while
// the caller computes), and a thread that waits on a request helps: it runs the
// operation at the head of the queue itself when nobody else is running one,
// which saves a thread hand-off on every blocking call.
#pragma once

#include <chorus/types.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace chorus::detail {

class Executor;

/// Completion record of one operation, shared by the queue and the Request handle.
struct RequestState {
  std::weak_ptr<Executor> executor;  ///< expired once the communicator has drained and gone
  bool done = false;                 ///< guarded by the executor's mutex (or final once it expired)
  Status status = Status::Success;
  std::string message;
};

class Executor : public std::enable_shared_from_this<Executor> {
 public:
  using Work = std::function<void()>;  ///< runs the operation; throws chorus::Error on failure
  /// Called with the failure of any operation (to break the transport, record the error).
  using FailureHook = std::function<void(Status, const std::string&)>;

  static std::shared_ptr<Executor> create(FailureHook on_failure);
  ~Executor();

  std::shared_ptr<RequestState> submit(Work work);
  /// Waits until `request` is done or `timeout` passed. Without a timeout the
  /// caller runs queued operations itself while nobody else does. True when done.
  bool wait(RequestState& request, std::optional<std::chrono::milliseconds> timeout);
  bool test(RequestState& request);
  /// Runs or waits for every queued operation, then stops the worker. Idempotent.
  void drain_and_stop();

 private:
  struct Item {
    Work work;
    std::shared_ptr<RequestState> request;
  };
  explicit Executor(FailureHook on_failure) : on_failure_(std::move(on_failure)) {}
  /// Pops and runs the head operation if none is running. Call with `lock` held; returns with it held.
  bool run_head(std::unique_lock<std::mutex>& lock);
  void worker_loop();

  FailureHook on_failure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace chorus::detail
