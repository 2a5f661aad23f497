// Uses the installed training layer: one rank, DDP over a linear model, one SGD step. On one
// rank the synchronised gradient is the local one, so the step must match plain SGD exactly.
#include <torch/torch.h>
#include <chorus/train/ddp.hpp>

#include <cstdio>

int main() {
  torch::manual_seed(0);
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 2);
  torch::Tensor x = torch::randn({8, 4});
  torch::Tensor target = torch::randn({8, 2});
  torch::Tensor weight_before = model->weight.detach().clone();

  chorus::InitOptions options;
  options.store_address = "127.0.0.1:0";
  chorus::train::DistributedDataParallel ddp(model, chorus::Communicator::init(options));
  torch::optim::SGD optimizer(model->parameters(), 0.5);
  optimizer.zero_grad();
  ddp.prepare_for_backward(x.size(0));
  torch::mse_loss(model->forward(x), target).backward();
  ddp.finish_gradient_sync();
  torch::Tensor expected = weight_before - 0.5 * model->weight.grad();
  optimizer.step();
  ddp.after_optimizer_step();

  bool ok = torch::allclose(model->weight, expected) &&
            !torch::equal(model->weight, weight_before) && ddp.stats().steps == 1;
  std::printf("train consumer: %s, %lld bytes reduced\n", ok ? "ok" : "WRONG",
              static_cast<long long>(ddp.stats().bytes_reduced));
  return ok ? 0 : 1;
}
