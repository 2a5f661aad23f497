// ChorusWork and CompletionQueue: see chorus_work.hpp for the contract.
#include "chorus_work.hpp"

#include <ATen/core/ivalue.h>
#include <Python.h>
#include <c10/util/Exception.h>

namespace chorus_torch {

ChorusWork::ChorusWork(int rank, c10d::OpType type, chorus::Request request,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                       std::function<void()> finish)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      finish_(std::move(finish)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  if (!request_.valid()) complete(nullptr);
}

void ChorusWork::complete(std::exception_ptr error) {
  {
    std::lock_guard serial(complete_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (completed_) return;
    }
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
  if (request_.valid()) {
    try {
      if (timeout == ::kNoTimeout) {
        request_.wait();
      } else if (!request_.wait_for(timeout)) {
        TORCH_CHECK(false, "chorus: ", c10d::opTypeToString(opType_), " did not complete within ",
                    timeout.count(), " ms");
      }
      complete(nullptr);
    } catch (const chorus::Error&) {
      complete(std::current_exception());
    }
  }
  std::lock_guard lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() { return future_; }

void ChorusWork::wait_and_complete() {
  try {
    request_.wait();
    complete(nullptr);
  } catch (const std::exception&) {
    complete(std::current_exception());
  }
}

CompletionQueue::CompletionQueue() : thread_([this] { run(); }) {}

CompletionQueue::~CompletionQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  // The completion thread drops the last references to finished works, and a tensor that has
  // a Python object takes the GIL to free it. This destructor is usually reached from Python
  // (destroy_process_group) with the GIL held: release it while joining, or both threads wait
  // for each other forever.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  thread_.join();
  if (saved != nullptr) PyEval_RestoreThread(saved);
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
    work->wait_and_complete();
    work.reset();
    lock.lock();
  }
}

}  // namespace chorus_torch
