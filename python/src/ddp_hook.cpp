// The averaging DDP hook in C++: see ddp_hook.hpp.
#include "ddp_hook.hpp"

#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

namespace chorus_torch {
namespace {

class AvgAllReduceHook final : public c10d::CommHookInterface {
 public:
  explicit AvgAllReduceHook(c10::intrusive_ptr<ProcessGroupChorus> group)
      : group_(std::move(group)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    const at::Tensor& buffer = bucket.getBuffer();
    group_->share_bucket(buffer);
    std::vector<at::Tensor> tensors{buffer};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::AVG;
    return group_->allreduce(tensors, opts)->getFuture();
  }

  /// The future's value is the work's outputs: the one-tensor list holding the bucket.
  at::Tensor parseHookResult(const c10::IValue& result) override {
    TORCH_INTERNAL_ASSERT(result.isTensorList(), "chorus: the averaging hook's result is ",
                          result.tagKind(), ", not a list of tensors");
    return result.toTensorVector().at(0);
  }

 private:
  c10::intrusive_ptr<ProcessGroupChorus> group_;
};

}  // namespace

void register_avg_hook(c10d::Reducer& reducer, c10::intrusive_ptr<ProcessGroupChorus> group) {
  reducer.register_comm_hook(std::make_unique<AvgAllReduceHook>(std::move(group)));
}

}  // namespace chorus_torch
