// The communicating autograd functions; see include/chorus/train/autograd.hpp.
//
// Each Function keeps its Group for backward in the context's saved data, wrapped in a capsule
// (an IValue that holds any CustomClassHolder), since a Group is no IValue type.
#include "tensor_collectives.hpp"

#include <chorus/train/autograd.hpp>

#include <torch/csrc/autograd/custom_function.h>

namespace chorus::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GroupCapsule : torch::CustomClassHolder {
  explicit GroupCapsule(Group g) : group(std::move(g)) {}
  Group group;
};

void save(AutogradContext* ctx, const Group& group, std::int64_t dim = 0,
          std::int64_t other_dim = 0) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<GroupCapsule>(group));
  ctx->saved_data["dim"] = dim;
  ctx->saved_data["other_dim"] = other_dim;
}

const Group& group_of(AutogradContext* ctx) {
  return static_cast<const GroupCapsule*>(ctx->saved_data["group"].toCapsule().get())->group;
}

std::int64_t dim_of(AutogradContext* ctx) { return ctx->saved_data["dim"].toInt(); }
std::int64_t other_dim_of(AutogradContext* ctx) { return ctx->saved_data["other_dim"].toInt(); }

/// Backward's result: the input's gradient, none for the group and the dimensions.
variable_list input_gradient(at::Tensor grad) { return {std::move(grad), {}, {}, {}}; }

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Group& g) {
    save(ctx, g);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return input_gradient(detail::all_reduce_sum(group_of(ctx), grads[0]));
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, const Group& g) {
    return detail::all_reduce_sum(g, x);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return input_gradient(grads[0]);
  }
};

/// The shape every operation along one dimension has (tensor_collectives.hpp).
using AlongDim = at::Tensor (*)(const Group&, const at::Tensor&, std::int64_t, const char*);

/// Forward applies `Forward` along `dim`, backward its adjoint `Backward`: the four functions
/// that move slices along one dimension differ only in the pair. `Name` names errors.
template <AlongDim Forward, AlongDim Backward, const char* Name>
struct AlongDimFunction : torch::autograd::Function<AlongDimFunction<Forward, Backward, Name>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Group& g,
                            std::int64_t dim) {
    save(ctx, g, dim);
    return Forward(g, x, dim, Name);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return input_gradient(Backward(group_of(ctx), grads[0], dim_of(ctx), Name));
  }
};

constexpr char kGather[] = "gather_along_dim";
constexpr char kSplit[] = "split_along_dim";
constexpr char kReduceScatter[] = "reduce_scatter_along_dim";
constexpr char kAllGather[] = "all_gather_along_dim";
using GatherAlongDim = AlongDimFunction<detail::all_gather_along, detail::own_slice, kGather>;
using SplitAlongDim = AlongDimFunction<detail::own_slice, detail::all_gather_along, kSplit>;
using ReduceScatterAlongDim =
    AlongDimFunction<detail::reduce_scatter_along, detail::all_gather_along, kReduceScatter>;
using AllGatherAlongDim =
    AlongDimFunction<detail::all_gather_along, detail::reduce_scatter_along, kAllGather>;

/// Forward: all-to-all scattering `scatter_dim`, gathering `gather_dim`; backward the reverse.
struct AllToAllAlongDims : torch::autograd::Function<AllToAllAlongDims> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Group& g,
                            std::int64_t scatter_dim, std::int64_t gather_dim) {
    save(ctx, g, scatter_dim, gather_dim);
    return detail::all_to_all_along(g, x, scatter_dim, gather_dim,
                                    "sequence_to_heads/heads_to_sequence");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return input_gradient(detail::all_to_all_along(group_of(ctx), grads[0], other_dim_of(ctx),
                                                   dim_of(ctx),
                                                   "sequence_to_heads/heads_to_sequence backward"));
  }
};

/// Forward: rows exchanged with the given counts; backward: the reverse exchange.
struct AllToAllVRows : torch::autograd::Function<AllToAllVRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Group& g,
                            const std::vector<std::int64_t>& send_rows,
                            const std::vector<std::int64_t>& recv_rows) {
    save(ctx, g);
    ctx->saved_data["send_rows"] = send_rows;
    ctx->saved_data["recv_rows"] = recv_rows;
    return detail::all_to_all_v_rows(g, x, send_rows, recv_rows, "all_to_all_v_rows");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<std::int64_t> send_rows = ctx->saved_data["send_rows"].toIntVector();
    const std::vector<std::int64_t> recv_rows = ctx->saved_data["recv_rows"].toIntVector();
    return {detail::all_to_all_v_rows(group_of(ctx), grads[0], recv_rows, send_rows,
                                      "all_to_all_v_rows backward"),
            {},
            {},
            {}};
  }
};

}  // namespace

at::Tensor all_to_all_v_rows(const at::Tensor& x, const Group& group,
                             const std::vector<std::int64_t>& send_rows,
                             const std::vector<std::int64_t>& recv_rows) {
  return AllToAllVRows::apply(x, group, send_rows, recv_rows);
}

at::Tensor copy_to_region(const at::Tensor& x, const Group& group) {
  return CopyToRegion::apply(x, group);
}

at::Tensor reduce_from_region(const at::Tensor& x, const Group& group) {
  return ReduceFromRegion::apply(x, group);
}

at::Tensor gather_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim) {
  return GatherAlongDim::apply(x, group, dim);
}

at::Tensor split_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim) {
  return SplitAlongDim::apply(x, group, dim);
}

at::Tensor reduce_scatter_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim) {
  return ReduceScatterAlongDim::apply(x, group, dim);
}

at::Tensor all_gather_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim) {
  return AllGatherAlongDim::apply(x, group, dim);
}

at::Tensor sequence_to_heads(const at::Tensor& x, const Group& group, std::int64_t seq_dim,
                             std::int64_t head_dim) {
  return AllToAllAlongDims::apply(x, group, head_dim, seq_dim);
}

at::Tensor heads_to_sequence(const at::Tensor& x, const Group& group, std::int64_t seq_dim,
                             std::int64_t head_dim) {
  return AllToAllAlongDims::apply(x, group, seq_dim, head_dim);
}

}  // namespace chorus::train
