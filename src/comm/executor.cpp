#include "comm/executor.hpp"

#include "comm/flight_recorder_dump.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <new>

namespace chorus::detail {
namespace {

// How long one progress step waits for in-flight point-to-point operations when
// nothing else is queued; new work interrupts it at once.
constexpr auto kProgressSlice = std::chrono::milliseconds(50);

struct Outcome {
  Status status = Status::Success;
  std::string message;
  bool failed() const { return status != Status::Success; }
};

template <typename F>
Outcome guarded(F&& f) {
  try {
    f();
    return {};
  } catch (const Error& e) {
    return {e.status(), e.what()};
  } catch (const std::bad_alloc&) {
    return {Status::SystemError, "out of memory"};
  } catch (const std::exception& e) {
    return {Status::InternalError, std::string("internal error: ") + e.what()};
  }
}

}  // namespace

std::shared_ptr<Executor> Executor::create(FailureHook on_failure, transport::Transport* transport,
                                           std::unique_ptr<FlightRecorder> recorder) {
  std::shared_ptr<Executor> executor(
      new Executor(std::move(on_failure), transport, std::move(recorder)));
  executor->worker_ = std::thread([raw = executor.get()] { raw->worker_loop(); });
  return executor;
}

Executor::~Executor() { drain_and_stop(); }

std::shared_ptr<RequestState> Executor::enqueue(Item item, const std::optional<OpDescription>& op,
                                                Start start) {
  item.request = std::make_shared<RequestState>();
  item.request->executor = weak_from_this();
  auto request = item.request;
  bool interrupt = false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Error(Status::InvalidUsage, "the communicator has been destroyed");
    if (recorder_ && op) request->record = recorder_->issued(*op, Clock::now());
    queue_.push_back(std::move(item));
    publish_idle();
    interrupt = waiting_in_transport_;
  }
  if (interrupt) transport_->interrupt();
  if (start == Start::Background) work_.notify_one();
  return request;
}

std::shared_ptr<RequestState> Executor::submit(Work work, const std::optional<OpDescription>& op,
                                               Start start) {
  return enqueue(Item{std::move(work), nullptr, nullptr}, op, start);
}

std::shared_ptr<RequestState> Executor::submit_posted(Post post,
                                                      const std::optional<OpDescription>& op,
                                                      Start start) {
  return enqueue(Item{nullptr, std::move(post), nullptr}, op, start);
}

void Executor::claimed_failed(std::exception_ptr error, FlightRecorder::RecordId record) {
  Outcome outcome = guarded([&] { std::rethrow_exception(error); });
  if (on_failure_) on_failure_(outcome.status, outcome.message);
  if (recorder_) recorder_->finished(record, outcome.status, outcome.message, coarse_now());
  {
    // claimed_ stays set through the dump: no other step runs meanwhile.
    std::unique_lock lock(mutex_);
    dump_after_failure(lock, outcome.status);
  }
  release_claim();
  throw Error(outcome.status, outcome.message);
}

void Executor::wake_after_claim() {
  std::lock_guard lock(mutex_);
  attention_.store(false, std::memory_order_relaxed);
  step_done();
}

void Executor::step_done() {
  publish_idle();
  changed_.notify_all();
  if (helpers_ == 0 && (has_work() || stopping_)) work_.notify_one();
}

void Executor::record_end(FlightRecorder::RecordId record, Status status,
                          const std::string& message) {
  if (recorder_) recorder_->finished(record, status, message, Clock::now());
}

void Executor::dump_after_failure(std::unique_lock<std::mutex>& lock, Status status) {
  if (!recorder_ || failure_dumped_) return;
  const bool dumped =
      status == Status::Timeout || status == Status::Mismatch || status == Status::RemoteError;
  if (!dumped) return;
  failure_dumped_ = true;
  // running_ stays set: no other step runs, and no waiter sees the request done yet.
  lock.unlock();
  dump_all_traces(to_string(status));
  lock.lock();
}

std::optional<TraceSnapshot> Executor::trace_snapshot() {
  if (!recorder_ || !recorder_->enabled()) return std::nullopt;
  return recorder_->snapshot(Clock::now());
}

void Executor::finish(const std::shared_ptr<RequestState>& request, Status status,
                      std::string message) {
  request->status = status;
  request->message = std::move(message);
  request->done = true;
}

bool Executor::step(std::unique_lock<std::mutex>& lock) {
  if (running_ || held_by_claim()) return false;
  if (!queue_.empty()) {
    if (queue_.front().post) {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      post_work(lock, std::move(item));
    } else if (!in_flight_.empty()) {
      progress_in_flight(lock, /*all=*/true);  // a collective waits for earlier sends/receives
    } else {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      run_work(lock, std::move(item));
    }
    return true;
  }
  if (in_flight_.empty()) return false;
  progress_in_flight(lock, /*all=*/false);
  return true;
}

void Executor::run_work(std::unique_lock<std::mutex>& lock, Item item) {
  running_ = true;
  if (recorder_) recorder_->started(item.request->record, Clock::now());
  lock.unlock();
  Outcome outcome = guarded(item.work);
  if (outcome.failed() && on_failure_) on_failure_(outcome.status, outcome.message);
  lock.lock();
  record_end(item.request->record, outcome.status, outcome.message);
  if (outcome.failed()) dump_after_failure(lock, outcome.status);
  finish(item.request, outcome.status, std::move(outcome.message));
  running_ = false;
  step_done();
}

void Executor::post_work(std::unique_lock<std::mutex>& lock, Item item) {
  running_ = true;
  if (recorder_) recorder_->started(item.request->record, Clock::now());
  lock.unlock();
  Posted posted;
  Outcome outcome = guarded([&] { posted = item.post(); });
  if (outcome.failed() && on_failure_) on_failure_(outcome.status, outcome.message);
  lock.lock();
  if (outcome.failed()) {
    for (InFlight& f : in_flight_) record_end(f.request->record, outcome.status, outcome.message);
    record_end(item.request->record, outcome.status, outcome.message);
    dump_after_failure(lock, outcome.status);
  }
  if (outcome.failed() && in_flight_.empty()) {
    finish(item.request, outcome.status, std::move(outcome.message));
  } else if (outcome.failed()) {
    // Earlier operations are still in flight: they fail too (the transport is
    // broken now), and completion stays in issue order.
    for (InFlight& f : in_flight_) finish(f.request, outcome.status, outcome.message);
    in_flight_.clear();
    finish(item.request, outcome.status, std::move(outcome.message));
  } else {
    in_flight_.push_back(InFlight{std::move(posted), std::move(item.request)});
  }
  running_ = false;
  step_done();
}

void Executor::progress_in_flight(std::unique_lock<std::mutex>& lock, bool all) {
  running_ = true;
  waiting_in_transport_ = !all;
  std::vector<transport::RequestId> ids;
  for (const InFlight& f : in_flight_)
    ids.insert(ids.end(), f.posted.ids.begin(), f.posted.ids.end());
  const Deadline first_deadline = in_flight_.front().posted.deadline;
  const std::vector<transport::RequestId> first_ids = in_flight_.front().posted.ids;
  const std::size_t count = in_flight_.size();
  lock.unlock();
  // Only this step touches in_flight_ while running_ is set, so reading it unlocked is safe.
  std::vector<char> done(count, 0);
  Outcome outcome = guarded([&] {
    Deadline until = all ? first_deadline : std::min(first_deadline, Clock::now() + kProgressSlice);
    if (transport_->wait_until(ids, until)) {
      std::fill(done.begin(), done.end(), 1);
      return;
    }
    if (Clock::now() >= first_deadline)
      transport_->wait(first_ids, first_deadline);  // throws Timeout
    for (std::size_t i = 0; i < count; ++i) done[i] = transport_->test(in_flight_[i].posted.ids);
  });
  if (outcome.failed() && on_failure_) on_failure_(outcome.status, outcome.message);
  lock.lock();
  std::size_t retired = 0;
  while (retired < count && (outcome.failed() || done[retired])) ++retired;
  for (std::size_t i = 0; i < retired; ++i) {
    record_end(in_flight_[i].request->record, outcome.status, outcome.message);
  }
  if (outcome.failed()) dump_after_failure(lock, outcome.status);
  for (std::size_t i = 0; i < retired; ++i) {
    const InFlight& f = in_flight_[i];
    if (!outcome.failed() && f.posted.source) f.request->source = *f.posted.source;
    finish(f.request, outcome.status, outcome.message);
  }
  in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(retired));
  running_ = false;
  waiting_in_transport_ = false;
  step_done();
}

void Executor::worker_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] {
      return (stopping_ && idle()) || (!running_ && has_work() && !held_by_claim());
    });
    if (step(lock)) continue;
    if (stopping_ && idle()) return;
  }
}

bool Executor::wait(RequestState& request, std::optional<std::chrono::milliseconds> timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::hours(24 * 365));
  std::unique_lock lock(mutex_);
  if (timeout) {
    // Only an unbounded wait helps: running an operation inline could outlast `timeout`.
    return changed_.wait_until(lock, deadline, [&] { return request.done; });
  }
  struct Helping {  // what is left when this waiter leaves is the worker's again
    Executor& e;
    explicit Helping(Executor& executor) : e(executor) { ++e.helpers_; }
    ~Helping() {
      if (--e.helpers_ == 0 && e.has_work()) e.work_.notify_one();
    }
  } helping(*this);
  while (!request.done) {
    if (step(lock)) continue;
    changed_.wait(lock);
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
  publish_idle();
  changed_.notify_all();
  work_.notify_one();
  changed_.wait(lock, [&] { return idle(); });
  lock.unlock();
  worker_.join();
}

}  // namespace chorus::detail
