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

#include "comm/flight_recorder.hpp"
#include "transport/transport.hpp"

#include <chorus/types.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
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
  FlightRecorder::RecordId record = 0;  ///< this operation in the flight recorder (0: none)
  int source = -1;  ///< a successful receive: the sender's rank (Posted::source)
};

/// What posting a point-to-point operation leaves to wait for.
struct Posted {
  std::vector<transport::RequestId> ids;
  Deadline deadline;
  /// A receive: where its sender's rank is (known at posting, or written by the transport
  /// once the message arrived); copied to RequestState::source on success. Null otherwise.
  std::shared_ptr<const int> source;
};

class Executor : public std::enable_shared_from_this<Executor> {
 public:
  using Work = std::function<void()>;    ///< runs an operation to completion; throws chorus::Error
  using Post = std::function<Posted()>;  ///< starts a point-to-point operation
  /// Called with the failure of any operation (to break the transport, record the error).
  using FailureHook = std::function<void(Status, const std::string&)>;

  /// `transport` progresses posted operations; it may be null when nothing is ever posted.
  /// `recorder` (optional) records every described operation; a failure (timeout,
  /// mismatch, remote error) then dumps every communicator's record before the
  /// failed request completes (flight_recorder_dump.hpp).
  static std::shared_ptr<Executor> create(FailureHook on_failure, transport::Transport* transport,
                                          std::unique_ptr<FlightRecorder> recorder = nullptr);
  ~Executor();

  /// Who starts a queued operation: the worker thread (a non-blocking call, which must make
  /// progress while its caller computes), or the caller, which waits on it at once (a blocking
  /// call: waking the worker would only cost a thread hand-off and a core).
  enum class Start { Background, ByCaller };
  /// `op` describes the operation for the flight recorder (not recorded without it).
  std::shared_ptr<RequestState> submit(Work work, const std::optional<OpDescription>& op = {},
                                       Start start = Start::Background);
  std::shared_ptr<RequestState> submit_posted(Post post,
                                              const std::optional<OpDescription>& op = {},
                                              Start start = Start::Background);
  /// A blocking operation the caller runs itself when nothing else is queued, in flight or
  /// running: claim() takes the idle executor (false: not idle, or stopping; queue it
  /// instead) and records the operation as issued and started; run_claimed() then runs it on
  /// the calling thread, records the end and releases the executor, with no request, queue
  /// entry or wake-up. It throws the operation's failure after the failure hook ran.
  /// Claim under the issuing lock, so that no later operation overtakes it; run after.
  /// `now`: when the caller issued it (recorded as issued and started). run_claimed calls
  /// `run()` inline, not through a Work, because this path exists to be short (both are
  /// inline, their failure and wake-up paths out of line); the end is stamped with
  /// coarse_now() (core/deadline.hpp), like `now`.
  ///
  /// Neither takes the queue's mutex on success. Only the issuing lock's holder adds to the
  /// queue, so an executor that was idle when claim() read `idle_` stays so until the claim
  /// is let go: later submissions queue behind `claimed_` (step() refuses to start while it
  /// is set). Letting go is a Dekker handshake with whoever found it set and must be woken
  /// (held_by_claim()): run_claimed clears `claimed_`, then reads `attention_`; they set
  /// `attention_`, then read `claimed_`, all sequentially consistent, under the mutex. One
  /// of the two sees the other's store: they do not wait, or run_claimed notifies them.
  bool claim(const OpDescription& op, Clock::time_point now, FlightRecorder::RecordId* record) {
    // The acquires pair with publish_idle()'s release and the clearing store of
    // release_claim(): the last step's or claimed run's work happened before. A claim still
    // running (set by an earlier holder of the issuing lock) refuses, as a running step does.
    if (!idle_.load(std::memory_order_acquire) || claimed_.load(std::memory_order_acquire)) {
      return false;
    }
    claimed_.store(true, std::memory_order_relaxed);  // the issuing lock publishes it
    *record = recorder_ ? recorder_->issued(op, now, /*started=*/true) : 0;
    return true;
  }
  template <typename Run>
  void run_claimed(Run&& run, FlightRecorder::RecordId record) {
    try {
      run();
    } catch (...) {
      claimed_failed(std::current_exception(), record);
    }
    if (recorder_) recorder_->finished(record, Status::Success, {}, coarse_now());
    release_claim();
  }
  /// Waits until `request` is done or `timeout` passed. Without a timeout the
  /// caller runs queued operations itself while nobody else does. True when done.
  bool wait(RequestState& request, std::optional<std::chrono::milliseconds> timeout);
  bool test(RequestState& request);
  /// Runs or waits for every queued operation, then stops the worker. Idempotent.
  void drain_and_stop();
  /// A copy of the flight record, taken under the queue's mutex; nullopt without a recorder.
  std::optional<TraceSnapshot> trace_snapshot();
  /// The algorithm the running collective chose (for its record). No lock; any thread.
  void note_algorithm(const std::string_view* name) noexcept {
    if (recorder_) recorder_->note_algorithm(name);
  }

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
  Executor(FailureHook on_failure, transport::Transport* transport,
           std::unique_ptr<FlightRecorder> recorder)
      : on_failure_(std::move(on_failure)), transport_(transport), recorder_(std::move(recorder)) {}
  std::shared_ptr<RequestState> enqueue(Item item, const std::optional<OpDescription>& op,
                                        Start start);
  /// run_claimed's failure: the failure hook, the record, the dump, the release; then throws
  /// the failure as an Error.
  [[noreturn]] void claimed_failed(std::exception_ptr error, FlightRecorder::RecordId record);
  /// Lets the claim go (the handshake above); wakes whoever asked for its end.
  void release_claim() {
    claimed_.store(false, std::memory_order_seq_cst);
    if (attention_.load(std::memory_order_seq_cst)) wake_after_claim();
  }
  void wake_after_claim();
  /// Takes one step if none is running: posts the head, runs it, or progresses
  /// what is in flight. Call with `lock` held; returns with it held. True when it did something.
  bool step(std::unique_lock<std::mutex>& lock);
  void run_work(std::unique_lock<std::mutex>& lock, Item item);
  void post_work(std::unique_lock<std::mutex>& lock, Item item);
  /// Waits for in-flight operations: all of them (before a collective) or until
  /// some progress is possible (a slice, woken early by new work).
  void progress_in_flight(std::unique_lock<std::mutex>& lock, bool all);
  /// Records the outcome in the flight recorder; finish() then completes the request.
  void record_end(FlightRecorder::RecordId record, Status status, const std::string& message);
  void finish(const std::shared_ptr<RequestState>& request, Status status, std::string message);
  /// After the first timeout, mismatch or remote error: dumps every record, with `lock`
  /// released (the failed requests are recorded, not yet complete). Returns with it held.
  void dump_after_failure(std::unique_lock<std::mutex>& lock, Status status);
  /// Nothing queued, in flight, running or claimed (asks held_by_claim()). Mutex held.
  bool idle() { return quiet() && !held_by_claim(); }
  /// Nothing queued, in flight or running (a claim aside). Mutex held.
  bool quiet() const { return !running_ && queue_.empty() && in_flight_.empty(); }
  /// Whether a claimed operation runs now; if so, asks to be notified when it ends. Call with
  /// the mutex held, and wait on changed_ or work_ (both are notified) when it returns true.
  bool held_by_claim() {
    if (!claimed_.load(std::memory_order_seq_cst)) return false;
    attention_.store(true, std::memory_order_seq_cst);
    return claimed_.load(std::memory_order_seq_cst);
  }
  /// Publishes whether claim() may take the executor now. Mutex held; after every change of
  /// the queue, what is in flight or running, and stopping_.
  void publish_idle() { idle_.store(quiet() && !stopping_, std::memory_order_release); }
  bool has_work() const { return !queue_.empty() || !in_flight_.empty(); }
  /// After a step: wakes the waiters, and the worker when work is left that no helping
  /// waiter will take. Call with the mutex held.
  void step_done();
  void worker_loop();

  FailureHook on_failure_;
  transport::Transport* transport_;
  std::unique_ptr<FlightRecorder> recorder_;  ///< locks itself
  bool failure_dumped_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;  ///< a step ended: waiters check their requests
  std::condition_variable work_;     ///< the worker's own: work no caller is helping with
  int helpers_ = 0;                  ///< threads in an unbounded wait(), which run steps
  std::deque<Item> queue_;
  std::deque<InFlight> in_flight_;
  bool running_ = false;
  bool waiting_in_transport_ =
      false;  ///< a step is blocked in the transport: interrupt it on submit
  bool stopping_ = false;
  std::atomic<bool> idle_{true};        ///< publish_idle(): what claim() reads without the mutex
  std::atomic<bool> claimed_{false};    ///< a claimed operation runs (claim to run_claimed's end)
  std::atomic<bool> attention_{false};  ///< someone waits for the claimed operation's end
  std::thread worker_;
};

}  // namespace chorus::detail
