// ChorusWork: the c10d::Work handed back by every ProcessGroupChorus operation.
//
// A work wraps one chorus::Request plus the tensors the request reads or writes.
// Some operations stage data through contiguous buffers; their `finish` step
// (copying results back into the caller's tensors) runs exactly once, on the
// first of wait(), isCompleted() or the completion thread to see the request done.
// The completion thread (CompletionQueue) exists only so that getFuture() -- which
// DDP chains its bucket callbacks on -- completes without anyone calling wait().
//
// Timeouts. An operation may carry a per-call timeout (the `timeout` of torch's
// options structs), counted from the moment it is issued; wait(timeout) adds a
// bound of its own. When the tighter of the two passes first, the operation
// fails with an error naming it and the timeout, and its process group is
// broken (GroupState::abort): the communicator is aborted, so peers blocked with
// this rank fail at once, and every later call on the group fails at once. The
// Watchdog enforces per-call timeouts of works nobody waits on.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chorus/communicator.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chorus_torch {

using Clock = std::chrono::steady_clock;

/// What one process group and its works share: the communicator, and why the
/// group is unusable once an operation timed out ("" while it is usable).
class GroupState {
 public:
  explicit GroupState(chorus::Communicator comm) : comm_(std::move(comm)) {}

  /// The communicator, to issue `op` on; throws naming `op` and the reason once broken.
  chorus::Communicator& comm(const char* op);
  /// Records `reason` (the first one stays) and aborts the communicator. Thread-safe.
  void abort(const std::string& reason);
  /// Drops the communicator (the process group is destroyed); later calls fail.
  void release();
  std::string broken_reason() const;
  std::string last_algorithm() const;

 private:
  mutable std::mutex mutex_;
  chorus::Communicator comm_;
  std::string reason_;
};

class ChorusWork : public c10d::Work {
 public:
  /// `outputs` become the future's value; `keep_alive` holds every buffer the
  /// request touches; `finish` copies staged results back (may be empty).
  /// `timeout` is the per-call timeout, or c10d::kUnsetTimeout for none.
  /// An invalid `request` makes a work that is complete at once.
  ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep_alive, std::function<void()> finish,
             std::shared_ptr<GroupState> group, std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  /// Waits for the request, at most `timeout` when it is not kNoTimeout and at most
  /// until the per-call deadline. Throws the operation's error, or the timeout error
  /// (after breaking the group, see the file comment).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  /// Runs when the last strong reference goes while weak ones (the Watchdog's)
  /// remain: frees the tensors now, not when the last weak reference goes.
  void release_resources() override;

  /// When the per-call timeout passes (none without one).
  std::optional<Clock::time_point> deadline() const { return deadline_; }
  /// Waits for the request until `until` (unbounded when empty); completes the
  /// work when the request is done. False when `until` passed first.
  bool wait_until(std::optional<Clock::time_point> until);
  /// Fails the work with its per-call timeout unless it completed (Watchdog).
  void expire_per_call();

 private:
  /// Runs `finish` and marks the work and its future complete; idempotent.
  /// `error` is the request's failure, if any; a timeout recorded by expire() wins.
  void complete(std::exception_ptr error);
  /// The operation did not complete within `budget` (`which` names the timeout):
  /// records the timeout error, breaks the group, and completes the work once
  /// the abort has failed the request (its buffers are free only then).
  void expire(std::chrono::milliseconds budget, const char* which);
  /// `error`, or an error naming the broken group when the group's abort caused it.
  std::exception_ptr explain(std::exception_ptr error) const;

  chorus::Request request_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finish_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<GroupState> group_;
  std::chrono::milliseconds timeout_;
  std::optional<Clock::time_point> deadline_;
  std::exception_ptr timeout_error_;  ///< guarded by complete_mutex_
  std::mutex complete_mutex_;  ///< serialises complete(); the base class mutex_ guards completed_
};

/// One thread per process group that waits on works in issue order (the order
/// Chorus completes them) and completes them, which fires their futures.
class CompletionQueue {
 public:
  CompletionQueue();
  /// Completes every queued work, then stops the thread.
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  void push(c10::intrusive_ptr<ChorusWork> work);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<ChorusWork>> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

/// Expires works whose per-call deadline passed, whether or not anyone waits on
/// them. Holds weak references: a work that completed and was dropped holds no tensors.
/// The thread starts with the first work watched.
class Watchdog {
 public:
  Watchdog() = default;
  /// Stops the thread; works still watched are left to their own waits.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Expires `work` at its deadline unless it completed by then (`work` has one).
  void watch(const c10::intrusive_ptr<ChorusWork>& work);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  static constexpr std::size_t kMinPrune = 64;
  std::multimap<Clock::time_point, c10::weak_intrusive_ptr<ChorusWork>> due_;
  std::size_t prune_at_ = kMinPrune;  ///< prune dropped works when due_ reaches this size
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus_torch
