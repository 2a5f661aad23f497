// ProcessGroupChorus: a torch.distributed (c10d, torch 1.13) process group whose
// operations run on one chorus::Communicator.
//
// Tensors must be CPU tensors; each operation takes exactly one tensor per list
// (one device per process). Non-contiguous tensors are staged through contiguous
// copies, complex tensors travel as pairs of reals (SUM and AVG only), and bool
// travels as uint8 (SUM/MAX act as logical or, PRODUCT/MIN as logical and).
// Anything unsupported throws a c10::Error naming the operation, dtype or op.
//
// The `timeout` of an operation's options (c10d::kUnsetTimeout: none) bounds that
// operation from the moment it is issued; the creation timeout (the
// communicator's) bounds every operation as well. Passing a timeout breaks the
// group: see chorus_work.hpp.
#pragma once

#include "chorus_work.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chorus/communicator.hpp>

#include <memory>

namespace chorus {
class StoreServer;
}

namespace chorus_torch {

class ProcessGroupChorus : public c10d::ProcessGroup {
 public:
  /// Joins the Chorus job whose store serves at `store_address` ("host:port",
  /// authenticated with `secret`); `server` keeps rank 0's store alive (may be null).
  ProcessGroupChorus(int rank, int size, const std::string& store_address,
                     const std::string& secret, std::chrono::milliseconds timeout,
                     std::shared_ptr<chorus::StoreServer> server);
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  /// The algorithm Chorus ran for the last collective on this rank (diagnostics).
  std::string last_algorithm() const { return group_->last_algorithm(); }

  /// chorus_torch.allreduce_avg_hook's move of a DDP gradient bucket into host-shared memory
  /// (shared_storage.hpp), whatever CHORUS_TORCH_SHARED_BUCKETS says: inside the hook the
  /// tensor is DDP's own bucket, which nothing outside DDP points into by raw pointer.
  /// Collective over the group: every rank calls it for its bucket of the same size, in the
  /// same order (DDP's buckets are). Moves it when wants_shared_storage(). When the host's
  /// shared memory cannot hold it (every rank alike), nothing is moved, and later calls move
  /// nothing either.
  void share_bucket(const at::Tensor& bucket);

 private:
  /// The communicator to issue `op` on, with per-call `timeout` (kUnsetTimeout:
  /// none). Throws naming `op` when the timeout is not positive or the group is
  /// unusable, before anything is sent.
  chorus::Communicator& comm(const char* op,
                             std::chrono::milliseconds timeout = c10d::kUnsetTimeout);
  /// Wraps `request` in a work with per-call `timeout`, queues it for completion
  /// (and for the watchdog when it has a timeout) and returns it.
  c10::intrusive_ptr<c10d::Work> track(c10d::OpType type, std::chrono::milliseconds timeout,
                                       chorus::Request request, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep_alive,
                                       std::function<void()> finish = {});
  /// A point-to-point work (not queued: see p2p.cpp).
  c10::intrusive_ptr<c10d::Work> p2p_work(c10d::OpType type, chorus::Request request,
                                          std::vector<at::Tensor> outputs, at::Tensor buffer,
                                          std::function<void()> finish);

  std::shared_ptr<chorus::StoreServer> server_;
  std::shared_ptr<GroupState> group_;
  bool shared_buckets_ = false;      ///< CHORUS_TORCH_SHARED_BUCKETS (shared_storage.hpp)
  bool shared_memory_full_ = false;  ///< share_bucket found no room once: it stops trying
  std::unique_ptr<CompletionQueue> completions_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace chorus_torch
