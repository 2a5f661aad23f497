// Mixed precision's checks and master step, and shards read back whole; see
// mixed_precision.hpp.
#include "mixed_precision.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <torch/torch.h>

namespace chorus::train::detail {

void check_mixed_precision(const std::optional<at::ScalarType>& type,
                           const std::vector<at::Tensor>& params, const std::string& who) {
  if (!type) return;
  require_argument(*type == at::kBFloat16 || *type == at::kHalf,
                   who + ": mixed precision computes in bf16 or fp16, not in " +
                       std::string(c10::toString(*type)));
  for (std::size_t i = 0; i < params.size(); ++i) {
    require_argument(params[i].scalar_type() == at::kFloat,
                     who + ": mixed precision needs fp32 parameters (the masters' type); " +
                         "parameter " + std::to_string(i) + " is " +
                         c10::toString(params[i].scalar_type()));
  }
}

void step_masters(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& masters,
                  const std::vector<at::Tensor>& gradients, const std::vector<at::Tensor>& halves) {
  for (std::size_t k = 0; k < masters.size(); ++k) {
    at::Tensor(masters[k]).mutable_grad() = gradients[k].to(at::kFloat);
  }
  optimizer.step();
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < masters.size(); ++k) {
    halves[k].copy_(masters[k]);
    at::Tensor(masters[k]).mutable_grad() = at::Tensor();
  }
}

std::vector<at::Tensor> gather_shards(const Group& group, Communicator comm,
                                      const std::vector<BucketLayout>& layouts,
                                      const std::vector<at::Tensor>& shards,
                                      const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out(params.size());
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < layouts.size(); ++b) {
    const at::Tensor& shard = shards[b];
    at::Tensor whole = at::empty({layouts[b].padded_numel}, shard.options());
    if (group.size() == 1) {
      whole.copy_(shard);
    } else {
      group.record(CollectiveKind::AllGather, whole.numel() * whole.element_size());
      comm.all_gather(shard.data_ptr(), whole.data_ptr(), static_cast<std::size_t>(shard.numel()),
                      chorus_dtype(shard.scalar_type(), "gather_shards"));
    }
    for (std::size_t j = 0; j < layouts[b].params.size(); ++j) {
      const at::Tensor& param = params[layouts[b].params[j]];
      out[layouts[b].params[j]] =
          whole.narrow(0, layouts[b].offsets[j], param.numel()).view(param.sizes()).clone();
    }
  }
  return out;
}

}  // namespace chorus::train::detail
