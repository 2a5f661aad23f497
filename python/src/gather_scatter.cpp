// ProcessGroupChorus: all-gather, gather, scatter, reduce-scatter and all-to-all.
// List forms stage through one flat buffer: rank r's block sits at r * block.
#include "process_group_chorus.hpp"

#include "tensor_staging.hpp"

#include <memory>

namespace chorus_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  require_one(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "chorus: allgather needs one output list of ", size_, " tensors");
  const at::Tensor& input = inputs[0];
  const Wire wire = wire_of(input, "allgather");
  require_like(outputs[0], input.scalar_type(), input.numel(), "allgather");
  at::Tensor in = contiguous_input(input);
  at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
  auto request = comm("allgather", opts.timeout)
                     .iall_gather(in.data_ptr(), flat.data_ptr(), wire.count(in), wire.dtype);
  std::vector<at::Tensor> targets = outputs[0];
  auto finish = [flat, targets] { split_flat(flat, 0, targets); };
  return track(c10d::OpType::ALLGATHER, opts.timeout, request, targets, {in, flat}, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const Wire wire = wire_of(input, "_allgather_base");
  require_like({output}, input.scalar_type(), size_ * input.numel(), "_allgather_base");
  at::Tensor in = contiguous_input(input);
  at::Tensor out = contiguous_output(output);
  auto request = comm("_allgather_base", opts.timeout)
                     .iall_gather(in.data_ptr(), out.data_ptr(), wire.count(in), wire.dtype);
  return track(c10d::OpType::_ALLGATHER_BASE, opts.timeout, request, {output}, {in, out},
               copy_back(output, out));
}

// output_lists[r][j] receives rank r's inputs[j]; every rank's inputs form one block.
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "chorus: allgather_coalesced needs at least one input tensor");
  TORCH_CHECK(static_cast<int>(output_lists.size()) == size_, "chorus: allgather_coalesced needs ",
              size_, " output lists, got ", output_lists.size());
  at::Tensor in = concat_flat(inputs);
  const Wire wire = wire_of(in, "allgather_coalesced");
  std::vector<at::Tensor> targets;
  for (const auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(),
                "chorus: allgather_coalesced: each output list needs ", inputs.size(), " tensors");
    for (std::size_t j = 0; j < list.size(); ++j) {
      require_like({list[j]}, in.scalar_type(), inputs[j].numel(), "allgather_coalesced");
      targets.push_back(list[j]);
    }
  }
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  auto request = comm("allgather_coalesced", opts.timeout)
                     .iall_gather(in.data_ptr(), flat.data_ptr(), wire.count(in), wire.dtype);
  auto finish = [flat, targets] { split_flat(flat, 0, targets); };
  return track(c10d::OpType::ALLGATHER_COALESCED, opts.timeout, request, targets, {in, flat},
               finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  require_one(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const Wire wire = wire_of(inputs[0], "gather");
  at::Tensor in = contiguous_input(inputs[0]);
  if (rank_ != root) {
    TORCH_CHECK(outputs.empty(), "chorus: gather takes output tensors only on the root");
    auto request = comm("gather", opts.timeout)
                       .igather(in.data_ptr(), nullptr, wire.count(in), wire.dtype, root);
    return track(c10d::OpType::GATHER, opts.timeout, request, {}, {in});
  }
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "chorus: gather needs one output list of ", size_, " tensors on the root");
  require_like(outputs[0], in.scalar_type(), in.numel(), "gather");
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  auto request = comm("gather", opts.timeout)
                     .igather(in.data_ptr(), flat.data_ptr(), wire.count(in), wire.dtype, root);
  std::vector<at::Tensor> targets = outputs[0];
  auto finish = [flat, targets] { split_flat(flat, 0, targets); };
  return track(c10d::OpType::GATHER, opts.timeout, request, targets, {in, flat}, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  require_one(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const Wire wire = wire_of(outputs[0], "scatter");
  at::Tensor out = contiguous_output(outputs[0]);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "chorus: scatter needs one input list of ", size_, " tensors on the root");
    require_like(inputs[0], out.scalar_type(), out.numel(), "scatter");
    flat = concat_flat(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty(), "chorus: scatter takes input tensors only on the root");
  }
  auto request = comm("scatter", opts.timeout)
                     .iscatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(),
                               wire.count(out), wire.dtype, root);
  std::vector<at::Tensor> keep{out};
  if (flat.defined()) keep.push_back(flat);
  return track(c10d::OpType::SCATTER, opts.timeout, request, outputs, keep,
               copy_back(outputs[0], out));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  require_one(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "chorus: reduce_scatter needs one input list of ", size_, " tensors");
  const Wire wire = wire_of(outputs[0], "reduce_scatter");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  require_like(inputs[0], outputs[0].scalar_type(), outputs[0].numel(), "reduce_scatter");
  at::Tensor flat = concat_flat(inputs[0]);
  at::Tensor out = contiguous_output(outputs[0]);
  auto request =
      comm("reduce_scatter", opts.timeout)
          .ireduce_scatter(flat.data_ptr(), out.data_ptr(), wire.count(out), wire.dtype, op);
  return track(c10d::OpType::REDUCE_SCATTER, opts.timeout, request, outputs, {flat, out},
               copy_back(outputs[0], out));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const Wire wire = wire_of(output, "_reduce_scatter_base");
  const chorus::ReduceOp op = wire_op(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  require_like({input}, output.scalar_type(), size_ * output.numel(), "_reduce_scatter_base");
  at::Tensor in = contiguous_input(input);
  at::Tensor out = contiguous_output(output);
  auto request =
      comm("_reduce_scatter_base", opts.timeout)
          .ireduce_scatter(in.data_ptr(), out.data_ptr(), wire.count(out), wire.dtype, op);
  return track(c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout, request, {output}, {in, out},
               copy_back(output, out));
}

}  // namespace chorus_torch
