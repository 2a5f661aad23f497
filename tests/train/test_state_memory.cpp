// unseen_state_bytes (tools/chorus-train/counting_allocator.hpp), what chorus-train
// --peak-memory adds to the counting allocator's peak so that it measures the model states
// chorus-plan predicts: the parameters held before the peak restarted, a gradient reducer's
// bucket once whether it lives in host-shared memory (which torch's allocator never hands out)
// or in ordinary memory allocated before the peak restarted, and no gradient the peak counted.
#include "counting_allocator.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <torch/torch.h>

#include <gtest/gtest.h>

namespace chorus::bench {
namespace {

train::Group one_rank_group() {
  InitOptions single;
  single.store_address = "127.0.0.1:0";
  return {Communicator::init(single), "dp", nullptr};
}

struct Model {
  at::Tensor weight = torch::randn({300, 40}).requires_grad_();
  at::Tensor bias = torch::randn({40}).requires_grad_();
  std::vector<at::Tensor> parameters() const { return {weight, bias}; }
  std::int64_t bytes() const { return (weight.numel() + bias.numel()) * 4; }
  void backward() const { (torch::ones({5, 300}).matmul(weight) + bias).sum().backward(); }
};

// A gradient reducer's steps leave the gradients in its one bucket (12,040 floats), made
// before the peak restarted: in the communicator's shared windows by default, else by torch.
// The peak sees neither; unseen_state_bytes counts the parameters and the bucket once.
TEST(StateMemory, AGradientBucketCountsOnceSharedOrNot) {
  CountingAllocator& counter = CountingAllocator::install();
  const train::Group group = one_rank_group();
  for (const bool shared : {true, false}) {
    const Model model;
    train::ReducerOptions options;
    options.shared_buckets = shared;
    train::GradientReducer reducer(model.parameters(), group, options);
    counter.reset_peak();
    for (int step = 0; step < 2; ++step) {
      reducer.begin_step();
      model.backward();
      reducer.finish_step();
    }
    ASSERT_EQ(model.weight.grad().storage().data_ptr().get(),
              model.bias.grad().storage().data_ptr().get())
        << "the gradients are not views of one bucket (shared " << shared << ")";
    EXPECT_EQ(unseen_state_bytes(model.parameters(), counter), 2 * model.bytes())
        << "shared " << shared;
  }
}

// Without a reducer autograd allocates the gradients after the restart: the peak holds them,
// so only the parameters are added; parameters made after the restart are the peak's too.
TEST(StateMemory, WhatThePeakCountedIsNotAddedAgain) {
  CountingAllocator& counter = CountingAllocator::install();
  const Model before;
  counter.reset_peak();
  const std::int64_t held = counter.current();
  before.backward();
  EXPECT_EQ(unseen_state_bytes(before.parameters(), counter), before.bytes());
  EXPECT_GE(counter.peak() - held, before.bytes());
  const Model after;
  after.backward();
  EXPECT_EQ(unseen_state_bytes(after.parameters(), counter), 0);
}

}  // namespace
}  // namespace chorus::bench
