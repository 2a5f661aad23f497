// ProcessGroupChorus: construction, completion tracking, the reductions,
// broadcast, barrier and point-to-point. The gather/scatter family is in
// gather_scatter.cpp.
#include "process_group_chorus.hpp"

#include "shared_storage.hpp"
#include "tensor_staging.hpp"

namespace chorus_torch {

ProcessGroupChorus::ProcessGroupChorus(int rank, int size, const std::string& store_address,
                                       const std::string& secret, std::chrono::milliseconds timeout,
                                       std::shared_ptr<chorus::StoreServer> server)
    : c10d::ProcessGroup(rank, size), server_(std::move(server)) {
  chorus::InitOptions options;
  options.nranks = size;
  options.rank = rank;
  options.store_address = store_address;
  options.host_store = false;  // the caller started (and publishes) the store
  options.auth_token = secret;
  options.timeout = timeout;
  group_ = std::make_shared<GroupState>(chorus::Communicator::init(options));
  completions_ = std::make_unique<CompletionQueue>();
  watchdog_ = std::make_unique<Watchdog>();
  shared_buckets_ = shared_buckets_from_env();
}

// The queue completes every outstanding work (the watchdog still expiring those
// past their per-call timeout) before the communicator goes away. Works the
// program still holds share the GroupState, not the communicator: it goes now.
ProcessGroupChorus::~ProcessGroupChorus() {
  completions_.reset();
  watchdog_.reset();
  group_->release();
}

chorus::Communicator& ProcessGroupChorus::comm(const char* op, std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout == c10d::kUnsetTimeout || timeout.count() > 0, "chorus: ", op,
              ": the timeout must be positive, got ", timeout.count(), " ms");
  return group_->comm(op);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::track(c10d::OpType type,
                                                         std::chrono::milliseconds timeout,
                                                         chorus::Request request,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> keep_alive,
                                                         std::function<void()> finish) {
  const bool pending = request.valid();
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, type, std::move(request), std::move(outputs),
                                      std::move(keep_alive), std::move(finish), group_, timeout);
  if (pending) {
    completions_->push(work);
    if (work->deadline()) watchdog_->watch(work);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::p2p_work(c10d::OpType type,
                                                            chorus::Request request,
                                                            std::vector<at::Tensor> outputs,
                                                            at::Tensor buffer,
                                                            std::function<void()> finish) {
  return c10::make_intrusive<ChorusWork>(rank_, type, std::move(request), std::move(outputs),
                                         std::vector<at::Tensor>{std::move(buffer)},
                                         std::move(finish), group_, c10d::kUnsetTimeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  require_one(tensors, "broadcast");
  const Wire wire = wire_of(tensors[0], "broadcast");
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm("broadcast", opts.timeout)
                     .ibroadcast(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype,
                                 static_cast<int>(opts.rootRank));
  return track(c10d::OpType::BROADCAST, opts.timeout, request, tensors, {buf},
               copy_back(tensors[0], buf));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  require_one(tensors, "allreduce");
  const Wire wire = wire_of(tensors[0], "allreduce");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  at::Tensor buf = contiguous_output(tensors[0]);
  chorus::Communicator& communicator = comm("allreduce", opts.timeout);
  if (shared_buckets_ && wants_shared_storage(buf)) move_into_shared_storage(buf, communicator);
  auto request =
      communicator.iall_reduce(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype, op);
  return track(c10d::OpType::ALLREDUCE, opts.timeout, request, tensors, {buf},
               copy_back(tensors[0], buf));
}

void ProcessGroupChorus::share_bucket(const at::Tensor& bucket) {
  if (shared_memory_full_ || !wants_shared_storage(bucket)) return;
  try {
    move_into_shared_storage(bucket, comm("allreduce"));
  } catch (const chorus::Error& e) {
    if (e.status() != chorus::Status::SystemError) throw;
    shared_memory_full_ = true;  // every rank saw the same failure (alloc_shared agrees)
  }
}

// All tensors travel as one flat buffer, reduced once, then copied back.
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "chorus: allreduce_coalesced needs at least one tensor");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "chorus: allreduce_coalesced needs tensors of one dtype, got ", t.scalar_type(),
                " and ", tensors[0].scalar_type());
    wire_of(t, "allreduce_coalesced");
  }
  const Wire wire = wire_of(tensors[0], "allreduce_coalesced");
  const chorus::ReduceOp op =
      wire_op(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  at::Tensor flat = concat_flat(tensors);
  auto request =
      comm("allreduce_coalesced", opts.timeout)
          .iall_reduce(flat.data_ptr(), flat.data_ptr(), wire.count(flat), wire.dtype, op);
  auto finish = [flat, tensors] { split_flat(flat, 0, tensors); };
  return track(c10d::OpType::ALLREDUCE_COALESCED, opts.timeout, request, tensors, {flat}, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  require_one(tensors, "reduce");
  const Wire wire = wire_of(tensors[0], "reduce");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request =
      comm("reduce", opts.timeout)
          .ireduce(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype, op, root);
  return track(c10d::OpType::REDUCE, opts.timeout, request, tensors, {buf},
               copy_back(tensors[0], buf));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& opts) {
  auto request = comm("barrier", opts.timeout).ibarrier();
  return track(c10d::OpType::BARRIER, opts.timeout, request, {}, {});
}

}  // namespace chorus_torch
