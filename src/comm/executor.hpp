// The ordered operation queue of one communicator.
//
// Operations start one at a time, in the order they were submitted. A worker
// thread runs them in the background (so non-blocking calls make progress while
// the caller computes), and a thread that waits on a request helps: it runs the
// operation at the head of the queue itself when nobody else is running one,
// which saves a thread hand-off on every blocking call.
//
// Point-to-point operations are only *posted* when they reach the head: they
// stay in flight while later point-to-point operations are posted too, so
// "irecv from left, isend to right, wait both" around a ring cannot deadlock.
// A collective starts only after every earlier point-to-point operation has
// completed, and requests are reported complete in issue order.
#pragma once

#include "transport/transport.hpp"

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
#include <vector>

namespace chorus::detail {

class Executor;

/// Completion record of one operation, shared by the queue and the Request handle.
struct RequestState {
  std::weak_ptr<Executor> executor;  ///< expired once the communicator has drained and gone
  bool done = false;                 ///< guarded by the executor's mutex (or final once it expired)
  Status status = Status::Success;
  std::string message;
};

/// What posting a point-to-point operation leaves to wait for.
struct Posted {
  std::vector<transport::RequestId> ids;
  Deadline deadline;
};

class Executor : public std::enable_shared_from_this<Executor> {
 public:
  using Work = std::function<void()>;    ///< runs an operation to completion; throws chorus::Error
  using Post = std::function<Posted()>;  ///< starts a point-to-point operation
  /// Called with the failure of any operation (to break the transport, record the error).
  using FailureHook = std::function<void(Status, const std::string&)>;

  /// `transport` progresses posted operations; it may be null when nothing is ever posted.
  static std::shared_ptr<Executor> create(FailureHook on_failure, transport::Transport* transport);
  ~Executor();

  std::shared_ptr<RequestState> submit(Work work);
  std::shared_ptr<RequestState> submit_posted(Post post);
  /// Waits until `request` is done or `timeout` passed. Without a timeout the
  /// caller runs queued operations itself while nobody else does. True when done.
  bool wait(RequestState& request, std::optional<std::chrono::milliseconds> timeout);
  bool test(RequestState& request);
  /// Runs or waits for every queued operation, then stops the worker. Idempotent.
  void drain_and_stop();

 private:
  struct Item {
    Work work;
    Post post;
    std::shared_ptr<RequestState> request;
  };
  struct InFlight {
    Posted posted;
    std::shared_ptr<RequestState> request;
  };
  Executor(FailureHook on_failure, transport::Transport* transport)
      : on_failure_(std::move(on_failure)), transport_(transport) {}
  std::shared_ptr<RequestState> enqueue(Item item);
  /// Takes one step if none is running: posts the head, runs it, or progresses
  /// what is in flight. Call with `lock` held; returns with it held. True when it did something.
  bool step(std::unique_lock<std::mutex>& lock);
  void run_work(std::unique_lock<std::mutex>& lock, Item item);
  void post_work(std::unique_lock<std::mutex>& lock, Item item);
  /// Waits for in-flight operations: all of them (before a collective) or until
  /// some progress is possible (a slice, woken early by new work).
  void progress_in_flight(std::unique_lock<std::mutex>& lock, bool all);
  void finish(const std::shared_ptr<RequestState>& request, Status status, std::string message);
  bool idle() const { return !running_ && queue_.empty() && in_flight_.empty(); }
  void worker_loop();

  FailureHook on_failure_;
  transport::Transport* transport_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  std::deque<InFlight> in_flight_;
  bool running_ = false;
  bool waiting_in_transport_ = false;  ///< a step is blocked in the transport: interrupt it on submit
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace chorus::detail
