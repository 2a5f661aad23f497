// ProcessGroupChorus: all-to-all, with equal blocks (iall_to_all) or with
// per-rank sizes (iall_to_all_v). Counts and displacements are in wire elements.
#include "process_group_chorus.hpp"

#include "tensor_staging.hpp"

#include <memory>
#include <numeric>

namespace chorus_torch {
namespace {

/// Per-rank wire counts for splitting `t` along dim 0 by `splits` (rows per rank);
/// empty `splits` means equal rows for every rank.
std::vector<std::size_t> block_counts(const at::Tensor& t, const std::vector<int64_t>& splits,
                                      const Wire& wire, int ranks, const char* side) {
  TORCH_CHECK(t.dim() >= 1, "chorus: alltoall_base needs tensors with a first dimension");
  const int64_t rows = t.size(0);
  const std::size_t row_count =
      wire.count(t) / static_cast<std::size_t>(std::max<int64_t>(rows, 1));
  std::vector<std::size_t> counts(ranks);
  if (splits.empty()) {
    TORCH_CHECK(rows % ranks == 0, "chorus: alltoall_base: the ", side, " tensor's ", rows,
                " rows do not split evenly over ", ranks, " ranks");
    for (auto& c : counts) c = static_cast<std::size_t>(rows / ranks) * row_count;
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == ranks, "chorus: alltoall_base: ", side,
              " split sizes have ", splits.size(), " entries for ", ranks, " ranks");
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows,
              "chorus: alltoall_base: ", side, " split sizes do not add up to ", rows, " rows");
  for (int r = 0; r < ranks; ++r) {
    TORCH_CHECK(splits[r] >= 0, "chorus: alltoall_base: negative split size");
    counts[r] = static_cast<std::size_t>(splits[r]) * row_count;
  }
  return counts;
}

/// Counts and displacements kept alive for the life of the request.
struct VarBlocks {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const Wire wire = wire_of(input, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "chorus: alltoall_base: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  wire_of(output, "alltoall_base");
  at::Tensor in = contiguous_input(input);
  at::Tensor out = contiguous_output(output);
  chorus::Communicator& communicator = comm("alltoall_base", opts.timeout);
  chorus::Request request;
  auto blocks = std::make_shared<VarBlocks>();
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(in.numel() == out.numel() && in.numel() % size_ == 0,
                "chorus: alltoall_base needs equal input and output sizes divisible by ", size_);
    request =
        communicator.iall_to_all(in.data_ptr(), out.data_ptr(), wire.count(in) / size_, wire.dtype);
  } else {
    blocks->send_counts = block_counts(in, input_splits, wire, size_, "input");
    blocks->recv_counts = block_counts(out, output_splits, wire, size_, "output");
    blocks->send_displs = displacements(blocks->send_counts);
    blocks->recv_displs = displacements(blocks->recv_counts);
    request = communicator.iall_to_all_v(in.data_ptr(), blocks->send_counts, blocks->send_displs,
                                         out.data_ptr(), blocks->recv_counts, blocks->recv_displs,
                                         wire.dtype);
  }
  auto copy = copy_back(output, out);
  auto finish = [blocks, copy] {
    if (copy) copy();
  };
  return track(c10d::OpType::ALLTOALL_BASE, opts.timeout, request, {output}, {in, out}, finish);
}

// Tensor i of `inputs` goes to rank i; tensor i of `outputs` comes from rank i.
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "chorus: alltoall needs ", size_, " input and ", size_, " output tensors");
  const Wire wire = wire_of(inputs[0], "alltoall");
  auto blocks = std::make_shared<VarBlocks>();
  for (int r = 0; r < size_; ++r) {
    require_like({inputs[r]}, inputs[0].scalar_type(), inputs[r].numel(), "alltoall");
    require_like({outputs[r]}, inputs[0].scalar_type(), outputs[r].numel(), "alltoall");
    blocks->send_counts.push_back(wire.count(inputs[r]));
    blocks->recv_counts.push_back(wire.count(outputs[r]));
  }
  blocks->send_displs = displacements(blocks->send_counts);
  blocks->recv_displs = displacements(blocks->recv_counts);
  at::Tensor in = concat_flat(inputs);
  int64_t total_out = 0;
  for (const at::Tensor& t : outputs) total_out += t.numel();
  at::Tensor flat = at::empty({total_out}, in.options());
  auto request =
      comm("alltoall", opts.timeout)
          .iall_to_all_v(in.data_ptr(), blocks->send_counts, blocks->send_displs, flat.data_ptr(),
                         blocks->recv_counts, blocks->recv_displs, wire.dtype);
  auto finish = [blocks, flat, outputs] { split_flat(flat, 0, outputs); };
  return track(c10d::OpType::ALLTOALL, opts.timeout, request, outputs, {in, flat}, finish);
}

}  // namespace chorus_torch
