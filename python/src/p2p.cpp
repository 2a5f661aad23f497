// ProcessGroupChorus: send, recv and recvAnysource with tags.
//
// Chorus keeps point-to-point requests in flight independently of the
// collectives, so these works are not queued behind them for completion: a
// point-to-point work (and its future) completes when wait() or isCompleted()
// observes the request done.
#include "process_group_chorus.hpp"

#include "tensor_staging.hpp"

namespace chorus_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  require_one(tensors, "send");
  const Wire wire = wire_of(tensors[0], "send");
  at::Tensor buf = contiguous_input(tensors[0]);
  auto request = comm("send").isend(buf.data_ptr(), wire.count(buf), wire.dtype, dst, tag);
  return p2p_work(c10d::OpType::SEND, request, tensors, buf, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  require_one(tensors, "recv");
  const Wire wire = wire_of(tensors[0], "recv");
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm("recv").irecv(buf.data_ptr(), wire.count(buf), wire.dtype, src, tag);
  return p2p_work(c10d::OpType::RECV, request, tensors, buf, copy_back(tensors[0], buf));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  require_one(tensors, "recvAnysource");
  const Wire wire = wire_of(tensors[0], "recvAnysource");
  at::Tensor buf = contiguous_output(tensors[0]);
  auto request = comm("recvAnysource").irecv_any(buf.data_ptr(), wire.count(buf), wire.dtype, tag);
  return p2p_work(c10d::OpType::RECVANYSOURCE, request, tensors, buf, copy_back(tensors[0], buf));
}

}  // namespace chorus_torch
