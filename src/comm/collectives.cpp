// The operations: validate, stamp the fingerprint, queue; the blocking forms then wait.
#include "comm/call_plan.hpp"
#include "comm/comm_state.hpp"
#include "comm/run_collective.hpp"
#include "comm/validate.hpp"

#include <chorus/communicator.hpp>

#include <memory>
#include <mutex>
#include <vector>

namespace chorus {
namespace {

constexpr int kAnySource = -1;  ///< submit_point_to_point's peer for irecv_any

using algorithms::Call;
using detail::CommState;
using Start = detail::Executor::Start;

/// Set while a blocking form built on its non-blocking form (all-to-all-v, send, receive)
/// issues its operation: the caller waits on it at once and runs it itself, so the worker
/// thread is not woken for it. The other blocking collectives say so to issue() directly.
thread_local bool issuing_blocking = false;

Start start_for_caller() { return issuing_blocking ? Start::ByCaller : Start::Background; }

/// Marks the operations issued in its scope as blocking (see issuing_blocking).
struct IssuingBlocking {
  IssuingBlocking() { issuing_blocking = true; }
  ~IssuingBlocking() { issuing_blocking = false; }
  IssuingBlocking(const IssuingBlocking&) = delete;
  IssuingBlocking& operator=(const IssuingBlocking&) = delete;
};

/// Issues one operation as blocking, then waits for it.
template <typename Issue>
Request run_blocking(Issue issue) {
  Request request = [&] {
    IssuingBlocking blocking;
    return issue();
  }();
  request.wait();
  return request;
}

/// live()'s failure: no communicator, or an aborted one. Out of line: every call checks.
[[noreturn, gnu::cold, gnu::noinline]] void fail_not_live(CommState* state) {
  if (!state) throw Error(Status::InvalidUsage, "empty communicator handle");
  state->record_error("the communicator was aborted by the application");
  throw Error(Status::InvalidUsage, "the communicator was aborted by the application");
}

[[gnu::always_inline]] inline CommState& live(const std::shared_ptr<CommState>& state) {
  if (!state || state->aborted) fail_not_live(state.get());
  return *state;
}

/// The call's fingerprint with seq 0 (number() stamps it).
Fingerprint fingerprint_of(const Call& a) {
  Fingerprint fp;
  fp.collective = a.collective;
  fp.count = a.collective == Collective::AllToAllV ? 0 : a.count;
  fp.root = has_root(a.collective) ? a.root : -1;
  fp.dtype = a.collective == Collective::Barrier ? 0 : static_cast<std::uint8_t>(a.dtype);
  fp.op = has_reduce_op(a.collective) ? static_cast<std::uint8_t>(a.op) : 0;
  return fp;
}

/// A collective of zero elements (all-to-all-v and barrier excepted) moves and
/// waits for nothing (as in MPI and NCCL): it completes at once, even behind
/// pending operations, and is not queued or recorded. It still takes its sequence
/// number, so a rank that skips it on one side is a mismatch at the next call.
bool moves_nothing(const Call& a) {
  return a.count == 0 && a.collective != Collective::Barrier &&
         a.collective != Collective::AllToAllV;
}

/// A successful request with nothing left to do (no executor: wait() and test() return at
/// once). One shared instance: nothing ever writes to it.
std::shared_ptr<detail::RequestState> completed() {
  static const std::shared_ptr<detail::RequestState> done = [] {
    auto state = std::make_shared<detail::RequestState>();
    state->done = true;
    return state;
  }();
  return done;
}

/// Stamps the fingerprint (`fingerprint`: the call's, its seq aside) with the next sequence
/// number and folds a rooted call into the roots digest. Under the issuing lock.
[[gnu::always_inline]] inline void number(CommState& s, Call& args,
                                          const Fingerprint& fingerprint) {
  args.fingerprint = fingerprint;
  args.fingerprint.seq = ++s.collective_seq;
  s.roots_digest.stamp(args.fingerprint);
}

/// Starts a numbered call: runs it here and now when it is `blocking` and the executor idle
/// (Executor::claim; then nullptr), else queues it and returns its request. `lock` holds the
/// issuing lock, which the claim needs and the run does not. `plan`: the call's planned run
/// (null: run_collective decides); `counts`: all-to-all-v's copied arrays, which a queued run
/// keeps.
[[gnu::always_inline]] inline std::shared_ptr<detail::RequestState> start(
    CommState& s, Call& args, bool blocking, std::unique_lock<YieldingLock>& lock,
    const detail::PlannedRun* plan, std::shared_ptr<std::vector<std::size_t>> counts) {
  if (moves_nothing(args)) return nullptr;
  const detail::OpDescription op{args.fingerprint};
  detail::FlightRecorder::RecordId record = 0;
  const Clock::time_point started = blocking ? coarse_now() : Clock::time_point{};
  if (!blocking || !s.executor->claim(op, started, &record)) {
    // Queued: it starts when it runs.
    return s.executor->submit([&s, args, counts]() mutable { detail::run_collective(s, args, {}); },
                              op, blocking ? Start::ByCaller : Start::Background);
  }
  lock.unlock();
  s.executor->run_claimed(
      [&] {
        if (plan) {
          detail::run_planned(s, args, *plan, started);
        } else {
          detail::run_collective(s, args, started);
        }
      },
      record);
  return nullptr;
}

/// Validates a collective (all-to-all-v's count arrays copied into `counts`, so the caller
/// may release them as soon as the call returns).
void check(CommState& s, Call& args, std::shared_ptr<std::vector<std::size_t>>& counts) {
  try {
    detail::validate_collective(args, s.rank, s.size);
  } catch (const Error& e) {
    s.record_error(e.what());
    throw;
  }
  if (args.collective != Collective::AllToAllV) return;
  counts = std::make_shared<std::vector<std::size_t>>();
  for (auto span : {args.send_counts, args.send_displs, args.recv_counts, args.recv_displs}) {
    counts->insert(counts->end(), span.begin(), span.end());
  }
  const std::size_t n = static_cast<std::size_t>(s.size);
  const std::size_t* base = counts->data();
  args.send_counts = {base, n};
  args.send_displs = {base + n, n};
  args.recv_counts = {base + 2 * n, n};
  args.recv_displs = {base + 3 * n, n};
}

/// Checks, numbers and queues a collective, or runs it here and now (a `blocking` call on an
/// idle communicator; or one that moves nothing): then it returns nullptr. A blocking call
/// of a planned shape (call_plan.hpp) whose needed buffers are there skips the checks and
/// runs with its plan; any other blocking call of a plannable shape is planned once checked.
/// `args` is the caller's own copy: this stamps it.
std::shared_ptr<detail::RequestState> issue(const std::shared_ptr<CommState>& state, Call& args,
                                            bool blocking) {
  CommState& s = live(state);
  if (blocking) {
    std::unique_lock lock(s.issue_mutex);
    const detail::CallPlan* plan = s.plans.find(args);
    if (plan && plan->buffers_pass(args)) {
      const detail::PlannedRun run = plan->run;
      number(s, args, plan->fingerprint);
      return start(s, args, true, lock, &run, nullptr);
    }
  }
  std::shared_ptr<std::vector<std::size_t>> counts;  // all-to-all-v only
  check(s, args, counts);
  const Fingerprint fingerprint = fingerprint_of(args);
  std::unique_lock lock(s.issue_mutex);
  if (blocking && detail::PlanTable::plannable(args)) {
    args.fingerprint = fingerprint;
    s.plans.keep(detail::plan_call(s, args));
  }
  number(s, args, fingerprint);
  return start(s, args, blocking, lock, nullptr, std::move(counts));
}

/// The non-blocking form (or a blocking form's issue, see issuing_blocking): a request (one
/// already complete when the call ran at once).
Request submit(const std::shared_ptr<CommState>& state, Call args) {
  auto request = issue(state, args, issuing_blocking);
  return Request(request ? std::move(request) : completed());
}

/// The blocking form: issues as blocking, then waits for what was queued; a call that ran at
/// once has nothing to wait for.
void run_blocking_collective(const std::shared_ptr<CommState>& state, Call&& args) {
  if (auto request = issue(state, args, /*blocking=*/true)) Request(std::move(request)).wait();
}

Call make(Collective c, const void* send, void* recv, std::size_t count, DataType dtype,
          ReduceOp op = ReduceOp::Sum, int root = 0) {
  Call a;
  a.collective = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

/// Queues one send or receive; `any_source`: a receive from whichever peer sends first (its
/// `peer` is kAnySource; a user's peer of -1 is never taken for it: it fails validation).
/// The fingerprint carries the tag in `root`; `seq` counts the messages sent to a peer, which
/// a receive cannot predict once any-source receives take messages, so receives match any
/// seq (kAnySeq). Posted when it reaches the head of the queue; completes in the background.
Request submit_point_to_point(const std::shared_ptr<CommState>& state, Collective kind,
                              const void* buf, std::size_t count, DataType dtype, int peer, int tag,
                              bool any_source = false) {
  CommState& s = live(state);
  try {
    if (any_source) {
      detail::validate_recv_any(buf, count, dtype, tag, s.size);
    } else {
      detail::validate_point_to_point(kind, buf, count, dtype, peer, s.rank, s.size);
      detail::validate_tag(kind, tag);
    }
  } catch (const Error& e) {
    s.record_error(e.what());
    throw;
  }
  std::lock_guard lock(s.issue_mutex);
  Fingerprint fp;
  fp.collective = kind;
  fp.count = count;
  fp.dtype = static_cast<std::uint8_t>(dtype);
  fp.root = tag;
  if (kind == Collective::Send) {
    fp.seq = s.send_seq[peer]++;
  } else {
    fp.seq = any_source ? 0 : s.recv_seq[peer]++;
    fp.reserved = transport::kAnySeq;
  }
  const std::size_t bytes = count * dtype_size(dtype);
  // A named receive knows its source now; the transport writes an any-source one's.
  auto source = kind == Collective::Recv ? std::make_shared<int>(peer) : nullptr;
  return Request(s.executor->submit_posted(
      [&s, kind, buf, bytes, peer, any_source, fp, source] {
        void* data = const_cast<void*>(buf);
        transport::RequestId id =
            kind == Collective::Send ? s.transport->post_send(peer, buf, bytes, fp)
            : any_source             ? s.transport->post_recv_any(data, bytes, fp, source.get())
                                     : s.transport->post_recv(peer, data, bytes, fp);
        return detail::Posted{{id}, deadline_after(s.config.timeout), source};
      },
      detail::OpDescription{fp, peer}, start_for_caller()));
}

}  // namespace

Request Communicator::iall_reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                                  ReduceOp op) {
  return submit(state_, make(Collective::AllReduce, send, recv, count, dtype, op));
}

Request Communicator::ibroadcast(const void* send, void* recv, std::size_t count, DataType dtype,
                                 int root) {
  return submit(state_, make(Collective::Broadcast, send, recv, count, dtype, ReduceOp::Sum, root));
}

Request Communicator::ireduce(const void* send, void* recv, std::size_t count, DataType dtype,
                              ReduceOp op, int root) {
  return submit(state_, make(Collective::Reduce, send, recv, count, dtype, op, root));
}

Request Communicator::iall_gather(const void* send, void* recv, std::size_t send_count,
                                  DataType dtype) {
  return submit(state_, make(Collective::AllGather, send, recv, send_count, dtype));
}

Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                      DataType dtype, ReduceOp op) {
  return submit(state_, make(Collective::ReduceScatter, send, recv, recv_count, dtype, op));
}

Request Communicator::igather(const void* send, void* recv, std::size_t send_count, DataType dtype,
                              int root) {
  return submit(state_,
                make(Collective::Gather, send, recv, send_count, dtype, ReduceOp::Sum, root));
}

Request Communicator::iscatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                               int root) {
  return submit(state_,
                make(Collective::Scatter, send, recv, recv_count, dtype, ReduceOp::Sum, root));
}

Request Communicator::iall_to_all(const void* send, void* recv, std::size_t count, DataType dtype) {
  return submit(state_, make(Collective::AllToAll, send, recv, count, dtype));
}

Request Communicator::iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                    std::span<const std::size_t> send_displs, void* recv,
                                    std::span<const std::size_t> recv_counts,
                                    std::span<const std::size_t> recv_displs, DataType dtype) {
  Call a = make(Collective::AllToAllV, send, recv, 0, dtype);
  a.send_counts = send_counts;
  a.send_displs = send_displs;
  a.recv_counts = recv_counts;
  a.recv_displs = recv_displs;
  return submit(state_, a);
}

Request Communicator::isend(const void* buf, std::size_t count, DataType dtype, int peer) {
  return submit_point_to_point(state_, Collective::Send, buf, count, dtype, peer, 0);
}

Request Communicator::irecv(void* buf, std::size_t count, DataType dtype, int peer) {
  return submit_point_to_point(state_, Collective::Recv, buf, count, dtype, peer, 0);
}

Request Communicator::isend(const void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  return submit_point_to_point(state_, Collective::Send, buf, count, dtype, peer, tag);
}

Request Communicator::irecv(void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  return submit_point_to_point(state_, Collective::Recv, buf, count, dtype, peer, tag);
}

Request Communicator::irecv_any(void* buf, std::size_t count, DataType dtype, int tag) {
  return submit_point_to_point(state_, Collective::Recv, buf, count, dtype, kAnySource, tag, true);
}

Request Communicator::ibarrier() {
  return submit(state_, make(Collective::Barrier, nullptr, nullptr, 0, DataType::Uint8));
}

void Communicator::all_reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                              ReduceOp op) {
  run_blocking_collective(state_, make(Collective::AllReduce, send, recv, count, dtype, op));
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType dtype,
                             int root) {
  run_blocking_collective(
      state_, make(Collective::Broadcast, send, recv, count, dtype, ReduceOp::Sum, root));
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                          ReduceOp op, int root) {
  run_blocking_collective(state_, make(Collective::Reduce, send, recv, count, dtype, op, root));
}

void Communicator::all_gather(const void* send, void* recv, std::size_t send_count,
                              DataType dtype) {
  run_blocking_collective(state_, make(Collective::AllGather, send, recv, send_count, dtype));
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                  DataType dtype, ReduceOp op) {
  run_blocking_collective(state_,
                          make(Collective::ReduceScatter, send, recv, recv_count, dtype, op));
}

void Communicator::gather(const void* send, void* recv, std::size_t send_count, DataType dtype,
                          int root) {
  run_blocking_collective(
      state_, make(Collective::Gather, send, recv, send_count, dtype, ReduceOp::Sum, root));
}

void Communicator::scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                           int root) {
  run_blocking_collective(
      state_, make(Collective::Scatter, send, recv, recv_count, dtype, ReduceOp::Sum, root));
}

void Communicator::all_to_all(const void* send, void* recv, std::size_t count, DataType dtype) {
  run_blocking_collective(state_, make(Collective::AllToAll, send, recv, count, dtype));
}

void Communicator::all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                std::span<const std::size_t> send_displs, void* recv,
                                std::span<const std::size_t> recv_counts,
                                std::span<const std::size_t> recv_displs, DataType dtype) {
  run_blocking([&] {
    return iall_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype);
  });
}

void Communicator::send(const void* buf, std::size_t count, DataType dtype, int peer) {
  run_blocking([&] { return isend(buf, count, dtype, peer); });
}

void Communicator::recv(void* buf, std::size_t count, DataType dtype, int peer) {
  run_blocking([&] { return irecv(buf, count, dtype, peer); });
}

void Communicator::send(const void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  run_blocking([&] { return isend(buf, count, dtype, peer, tag); });
}

void Communicator::recv(void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  run_blocking([&] { return irecv(buf, count, dtype, peer, tag); });
}

int Communicator::recv_any(void* buf, std::size_t count, DataType dtype, int tag) {
  return run_blocking([&] { return irecv_any(buf, count, dtype, tag); }).source();
}

void Communicator::barrier() {
  run_blocking_collective(state_, make(Collective::Barrier, nullptr, nullptr, 0, DataType::Uint8));
}

}  // namespace chorus
