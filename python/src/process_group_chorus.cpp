// ProcessGroupChorus: construction, completion tracking, the reductions,
// broadcast, barrier and point-to-point. The gather/scatter family is in
// gather_scatter.cpp.
#include "process_group_chorus.hpp"

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
  comm_ = chorus::Communicator::init(options);
  completions_ = std::make_unique<CompletionQueue>();
}

// The queue completes every outstanding work before the communicator goes away.
ProcessGroupChorus::~ProcessGroupChorus() { completions_.reset(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::track(c10d::OpType type, chorus::Request request,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> keep_alive,
                                                         std::function<void()> finish) {
  const bool pending = request.valid();
  auto work = c10::make_intrusive<ChorusWork>(rank_, type, std::move(request), std::move(outputs),
                                              std::move(keep_alive), std::move(finish));
  if (pending) completions_->push(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  require_one(tensors, "broadcast");
  const Wire wire = wire_of(tensors[0], "broadcast");
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm_.ibroadcast(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype,
                                  static_cast<int>(opts.rootRank));
  return track(c10d::OpType::BROADCAST, request, tensors, {buf}, copy_back(tensors[0], buf));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  require_one(tensors, "allreduce");
  const Wire wire = wire_of(tensors[0], "allreduce");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm_.iall_reduce(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype, op);
  return track(c10d::OpType::ALLREDUCE, request, tensors, {buf}, copy_back(tensors[0], buf));
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
  const chorus::ReduceOp op = wire_op(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  at::Tensor flat = concat_flat(tensors);
  auto request = comm_.iall_reduce(flat.data_ptr(), flat.data_ptr(), wire.count(flat), wire.dtype, op);
  auto finish = [flat, tensors] { split_flat(flat, 0, tensors); };
  return track(c10d::OpType::ALLREDUCE_COALESCED, request, tensors, {flat}, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  require_one(tensors, "reduce");
  const Wire wire = wire_of(tensors[0], "reduce");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm_.ireduce(buf.data_ptr(), buf.data_ptr(), wire.count(buf), wire.dtype, op, root);
  return track(c10d::OpType::REDUCE, request, tensors, {buf}, copy_back(tensors[0], buf));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions&) {
  return track(c10d::OpType::BARRIER, comm_.ibarrier(), {}, {});
}

}  // namespace chorus_torch
