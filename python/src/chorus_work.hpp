// ChorusWork: the c10d::Work handed back by every ProcessGroupChorus operation.
//
// A work wraps one chorus::Request plus the tensors the request reads or writes.
// Some operations stage data through contiguous buffers; their `finish` step
// (copying results back into the caller's tensors) runs exactly once, on the
// first of wait(), isCompleted() or the completion thread to see the request done.
// The completion thread (CompletionQueue) exists only so that getFuture() -- which
// DDP chains its bucket callbacks on -- completes without anyone calling wait().
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chorus/communicator.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus_torch {

class ChorusWork : public c10d::Work {
 public:
  /// `outputs` become the future's value; `keep_alive` holds every buffer the
  /// request touches; `finish` copies staged results back (may be empty).
  /// An invalid `request` makes a work that is complete at once.
  ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep_alive, std::function<void()> finish);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  /// Waits for the request; kNoTimeout means the communicator's own deadline.
  /// Throws the operation's error, or a timeout error naming the operation.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /// Blocks until the request is done and completes the work (completion thread).
  void wait_and_complete();

 private:
  /// Runs `finish` and marks the work and its future complete; idempotent.
  /// `error` is the request's failure, if any.
  void complete(std::exception_ptr error);

  chorus::Request request_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finish_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
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

}  // namespace chorus_torch
