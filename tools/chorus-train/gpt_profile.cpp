// The GPT's compute profile (gpt_profile.hpp): its blocks, embedding, head and optimizer
// timed on every rank of a job at once, or on this process alone.
#include "gpt_profile.hpp"

#include "tasks.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace chorus::train_tool {
namespace {

constexpr int kProfileRuns = 5;  ///< the first is a warm-up

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Times work items in ms. With a communicator, a barrier before each item starts its ranks
/// together, so that every item is timed while all of them compute it at once (every rank
/// runs the same items in the same order); without one, on this process alone.
class Stopwatch {
 public:
  explicit Stopwatch(Communicator* comm) : comm_(comm) {}

  double operator()(const std::function<void()>& work) const {
    if (comm_ != nullptr) comm_->barrier();
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

 private:
  Communicator* comm_;
};

/// One profiling run's times: per block forward and backward, the embedding's and the head's.
struct ProfileRun {
  std::vector<double> forward, backward;
  double embedding = 0, head = 0;
};

ProfileRun profile_once(const Stopwatch& timed, const train::GptModel& model,
                        const at::Tensor& tokens) {
  const train::GptConfig& c = model.config();
  ProfileRun run;
  at::Tensor embedded, x, loss;
  run.embedding = timed([&] { embedded = model.embed(tokens); });
  std::vector<at::Tensor> inputs, outputs;
  x = embedded.detach().requires_grad_();
  for (std::int64_t i = 0; i < c.layers; ++i) {
    inputs.push_back(x);
    run.forward.push_back(timed([&] { outputs.push_back(model.run_blocks(x, i, 1)); }));
    x = outputs.back().detach().requires_grad_();
  }
  run.head = timed([&] {
    loss = train::vocab_parallel_cross_entropy(model.head(x), tokens, model.tp(), c.vocab).mean();
    loss.backward();
  });
  at::Tensor grad = x.grad();
  run.backward.resize(static_cast<std::size_t>(c.layers));
  for (std::int64_t i = c.layers - 1; i >= 0; --i) {
    const auto k = static_cast<std::size_t>(i);
    run.backward[k] = timed([&] { outputs[k].backward(grad); });
    grad = inputs[k].grad();
  }
  run.embedding += timed([&] { embedded.backward(grad); });
  return run;
}

/// kProfileRuns passes of `model` over a random micro-batch of `b` samples, the first (a
/// warm-up) left out.
std::vector<ProfileRun> profile_runs(const Stopwatch& timed, const train::GptModel& model,
                                     std::int64_t b) {
  const train::GptConfig& c = model.config();
  const at::Tensor tokens =
      torch::randint(c.vocab, {c.sequence, b}, torch::TensorOptions().dtype(torch::kLong));
  std::vector<ProfileRun> runs;
  for (int k = 0; k < kProfileRuns; ++k) runs.push_back(profile_once(timed, model, tokens));
  runs.erase(runs.begin());
  return runs;
}

double middle(const std::vector<ProfileRun>& runs,
              const std::function<double(const ProfileRun&)>& of) {
  std::vector<double> v;
  for (const ProfileRun& r : runs) v.push_back(of(r));
  return median(v);
}

/// One size's times: the blocks' medians' mean forward and backward, the embedding's and the
/// head's medians.
plan::SizeTimes size_times(const std::vector<ProfileRun>& runs, std::int64_t b) {
  plan::SizeTimes t;
  t.micro_batch = b;
  const std::size_t layers = runs.front().forward.size();
  for (std::size_t i = 0; i < layers; ++i) {
    t.layer_forward_ms += middle(runs, [i](const ProfileRun& r) { return r.forward[i]; }) /
                          static_cast<double>(layers);
    t.layer_backward_ms += middle(runs, [i](const ProfileRun& r) { return r.backward[i]; }) /
                           static_cast<double>(layers);
  }
  t.embedding_ms = middle(runs, [](const ProfileRun& r) { return r.embedding; });
  t.head_ms = middle(runs, [](const ProfileRun& r) { return r.head; });
  return t;
}

/// The optimizer's step with the gradient clipping on `parameters` (their gradients left by
/// the profiling runs) per parameter, in ns: the median of kProfileRuns - 1 steps after a
/// warm-up one (which makes the optimizer's state).
double optimizer_ns_per_parameter(const Stopwatch& timed, const Options& options,
                                  std::vector<at::Tensor> parameters) {
  double count = 0;
  for (const at::Tensor& p : parameters) count += static_cast<double>(p.numel());
  const auto optimizer = make_optimizer(options, parameters);
  std::vector<double> ms;
  for (int k = 0; k < kProfileRuns; ++k) {
    ms.push_back(timed([&] {
      torch::nn::utils::clip_grad_norm_(parameters, 1.0);
      optimizer->step();
    }));
  }
  ms.erase(ms.begin());
  return median(ms) * 1e6 / count;
}

/// `config` at tp 1 on the one-process group `self`, under `recompute`.
train::GptModel single_process_model(train::GptConfig c, const train::Group& self,
                                     train::Recompute recompute) {
  c.sequence_parallel = false;
  c.recompute = recompute;
  return c.moe.experts > 0 ? train::GptModel(c, self, self, self) : train::GptModel(c, self);
}

/// The blocks' mean backward at every size of `p` under selective and under full
/// recomputation (each its own model).
void profile_recomputation(const Stopwatch& timed, const train::GptConfig& config,
                           const train::Group& self, plan::ComputeProfile& p) {
  const train::GptModel selective = single_process_model(config, self, train::Recompute::Selective);
  const train::GptModel full = single_process_model(config, self, train::Recompute::Full);
  for (const plan::SizeTimes& t : p.sizes()) {
    const std::int64_t b = t.micro_batch;
    p.recompute.push_back({b, size_times(profile_runs(timed, selective, b), b).layer_backward_ms,
                           size_times(profile_runs(timed, full, b), b).layer_backward_ms});
  }
}

/// Each of `p`'s times the largest over the ranks of `comm` (every rank's profile has the
/// same shape): a step waits for its slowest rank at every collective (tp's after each block,
/// dp's at the end of the backward), so the slowest rank's times are the ones a step sees.
void take_the_slowest(Communicator& comm, plan::ComputeProfile& p) {
  const std::vector<double*> times = plan::measured_times(p);
  std::vector<double> values;
  for (const double* t : times) values.push_back(*t);
  comm.all_reduce(values.data(), values.data(), values.size(), DataType::Float64, ReduceOp::Max);
  for (std::size_t i = 0; i < times.size(); ++i) *times[i] = values[i];
}

/// The profile of `config` at tp 1 and micro-batch --batch / --micro-batches, timed by
/// `timed`: per-block lines and their mean, the embedding's and head's times; with
/// `every_size` also the times at each power of two below that micro-batch, the backward
/// under recomputation at every size, and the optimizer's step.
plan::ComputeProfile profile(const Stopwatch& timed, const Options& options,
                             const train::GptConfig& config, bool every_size) {
  torch::set_num_threads(options.threads);
  InitOptions single;  // the model at tp 1 on this process alone
  single.store_address = "127.0.0.1:0";
  const train::Group self{Communicator::init(single), "profile", nullptr};
  const train::GptConfig& c = config;
  const train::GptModel model = single_process_model(config, self, train::Recompute::None);
  const std::int64_t b = options.batch / options.micro_batches;
  const std::vector<ProfileRun> runs = profile_runs(timed, model, b);
  plan::ComputeProfile p;
  p.hidden = c.hidden;
  p.heads = c.heads;
  p.seq = c.sequence;
  p.vocab = c.vocab;
  p.micro_batch = b;
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.layers); ++i) {
    p.block_forward_ms.push_back(middle(runs, [i](const ProfileRun& r) { return r.forward[i]; }));
    p.block_backward_ms.push_back(middle(runs, [i](const ProfileRun& r) { return r.backward[i]; }));
  }
  const plan::SizeTimes at_b = size_times(runs, b);
  p.layer_forward_ms = at_b.layer_forward_ms;
  p.layer_backward_ms = at_b.layer_backward_ms;
  p.embedding_ms = at_b.embedding_ms;
  p.head_ms = at_b.head_ms;
  if (!every_size) return p;
  for (std::int64_t size = 1; size < b; size *= 2)
    p.more_sizes.push_back(size_times(profile_runs(timed, model, size), size));
  profile_recomputation(timed, config, self, p);
  p.optimizer_ns_per_parameter = optimizer_ns_per_parameter(timed, options, model.parameters());
  return p;
}

}  // namespace

plan::ComputeProfile profile_gpt(const Options& options, const train::GptConfig& config,
                                 Communicator& comm) {
  plan::ComputeProfile p = profile(Stopwatch(&comm), options, config, true);
  take_the_slowest(comm, p);
  p.concurrency = comm.size();
  return p;
}

plan::ComputeProfile profile_gpt_blocks(const Options& options, const train::GptConfig& config) {
  return profile(Stopwatch(nullptr), options, config, false);
}

}  // namespace chorus::train_tool
