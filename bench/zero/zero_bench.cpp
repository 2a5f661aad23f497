// zero_bench: the GPT model trained with fp32 Adam under DDP or one ZeRO stage, for its memory
// per rank and its step time.
//
//   zero_bench --strategy ddp|zero1|zero2|zero3 [--layers L] [--hidden H] [--heads A] [--seq S]
//              [--batch B] [--steps N] [--warmup W] [--threads K] [--seed X] [--prefetch P]
//              [--private-buckets] [--budget-mib M]
//
// Run under chorusrun (dp = world) or alone. Prints one line on rank 0:
//
//   zero_bench strategy=... dp=D layers=L hidden=H heads=A seq=S batch=B threads=K params=Ψ
//              param_bytes=... grad_bytes=... optimizer_bytes=... held_bytes=...
//              formula_bytes=... build_peak_bytes=... peak_bytes=... gathered_peak_bytes=...
//              step_ms_median=... step_ms_min=... step_ms_max=...
//
// Memory, every figure the largest over the ranks: param/grad/optimizer_bytes are what the
// strategy holds between steps by its own account (tensor sizes, shard padding included);
// held_bytes is what a counting CPU allocator (tools/chorus-train/counting_allocator.hpp) sees held
// after the last step beyond what was held before the model was built (the model's buffers
// included); formula_bytes is PARALLEL.md section 3's fp32 Adam line for the strategy with
// Ψ = params, unpadded (DDP 16Ψ, ZeRO-1 8Ψ + 8Ψ/d, ZeRO-2 4Ψ + 12Ψ/d, ZeRO-3 16Ψ/d);
// build_peak_bytes is the allocator's peak while the model and the strategy are built (every
// rank builds the whole model first); peak_bytes its peak over the timed steps (activations,
// gathered units and gradients in flight included). --private-buckets keeps DDP's and
// ZeRO-1/2's buckets out of host-shared memory (Communicator::alloc_shared, which the
// allocator does not see): memory runs need it, speed runs compare the defaults.
//
// --budget-mib M: from the first step on, an allocation that would hold more than M MiB
// beyond the bytes held before the model was built fails; the rank prints
// "zero_bench: rank R: over the budget of M MiB (...)", aborts the communicator (its peers fail
// at once, naming it) and exits with status 3.
//
// step_ms: wall time of a whole step (zero_grad, forward, backward, gradient reduction,
// optimizer step, ZeRO's all-gathers); the slowest rank's median over the timed steps.
#include "../gpt/bench_process.hpp"
#include "counting_allocator.hpp"  // tools/chorus-train

#include <chorus/communicator.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using chorus::train::Group;

struct Options {
  std::string strategy = "ddp";
  bool private_buckets = false;
  std::int64_t layers = 2, hidden = 256, heads = 4, seq = 64, batch = 4;
  std::int64_t steps = 10, warmup = 2, threads = 1, seed = 1, prefetch = 1, budget_mib = 0;
};

const char* const kStrategies[] = {"ddp", "zero1", "zero2", "zero3"};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "zero_bench: " << problem
            << "\nusage: zero_bench --strategy ddp|zero1|zero2|zero3 [--layers L] [--hidden H] "
               "[--heads A] [--seq S] [--batch B] [--steps N] [--warmup W] [--threads K] "
               "[--seed X] [--prefetch P] [--private-buckets] [--budget-mib M]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  const auto strategy = [&](const std::string& text) -> std::string {
    if (std::find(std::begin(kStrategies), std::end(kStrategies), text) == std::end(kStrategies))
      return "--strategy takes ddp, zero1, zero2 or zero3, not " + text;
    o.strategy = text;
    return {};
  };
  chorus::bench::parse_flags(argc, argv,
                             {.switches = {{"--private-buckets", &o.private_buckets}},
                              .words = {{"--strategy", strategy}},
                              .numbers = {{"--layers", &o.layers},
                                          {"--hidden", &o.hidden},
                                          {"--heads", &o.heads},
                                          {"--seq", &o.seq},
                                          {"--batch", &o.batch},
                                          {"--steps", &o.steps},
                                          {"--warmup", &o.warmup},
                                          {"--threads", &o.threads},
                                          {"--seed", &o.seed},
                                          {"--prefetch", &o.prefetch},
                                          {"--budget-mib", &o.budget_mib}}},
                             usage);
  if (o.layers < 1 || o.steps < 1 || o.threads < 1 || o.threads > 256 || o.batch < 1 || o.seq < 1 ||
      o.prefetch > 64)
    usage(
        "a value is out of range (layers, steps, threads, batch, seq >= 1; threads <= 256; "
        "prefetch <= 64)");
  return o;
}

/// What a strategy holds between steps by its own account.
struct Held {
  std::int64_t parameters = 0, gradients = 0, optimizer_state = 0, gathered_peak = 0;
};

/// One training step of the GPT model under a strategy.
class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual void step(const at::Tensor& tokens, const at::Tensor& targets) = 0;
  virtual Held held() const = 0;
};

std::unique_ptr<torch::optim::Optimizer> adam(std::vector<at::Tensor> params) {
  return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(1e-4));
}

class DdpTrainer final : public Trainer {
 public:
  DdpTrainer(const chorus::train::GptModel& model, const Group& group, bool private_buckets)
      : model_(model),
        reducer_(model.parameters(), group, reducer_options(private_buckets)),
        optimizer_(adam(model.parameters())) {}
  void step(const at::Tensor& tokens, const at::Tensor& targets) override {
    optimizer_->zero_grad();
    reducer_.begin_step();
    model_.loss(tokens, targets).backward();
    reducer_.finish_step();
    optimizer_->step();
  }
  Held held() const override {
    Held h;
    for (const auto& p : model_.parameters()) h.parameters += p.numel() * p.element_size();
    h.gradients = reducer_.gradient_bytes();
    h.optimizer_state = chorus::train::optimizer_state_bytes(*optimizer_);
    return h;
  }

 private:
  static chorus::train::ReducerOptions reducer_options(bool private_buckets) {
    chorus::train::ReducerOptions r;
    r.shared_buckets = !private_buckets;
    return r;
  }
  const chorus::train::GptModel& model_;
  chorus::train::GradientReducer reducer_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

class Zero12Trainer final : public Trainer {
 public:
  Zero12Trainer(const chorus::train::GptModel& model, const Group& group, int stage,
                bool private_buckets)
      : model_(model), zero_(model.parameters(), group, adam, options(stage, private_buckets)) {}
  void step(const at::Tensor& tokens, const at::Tensor& targets) override {
    zero_.zero_grad();
    zero_.begin_step();
    model_.loss(tokens, targets).backward();
    zero_.finish_step();
    zero_.step();
  }
  Held held() const override {
    const auto m = zero_.memory();
    return {m.parameters, m.gradients, m.optimizer_state, 0};
  }

 private:
  static chorus::train::ZeroOptions options(int stage, bool private_buckets) {
    chorus::train::ZeroOptions z;
    z.stage = stage;
    z.shared_buckets = !private_buckets;
    return z;
  }
  const chorus::train::GptModel& model_;
  chorus::train::ZeroOptimizer zero_;
};

class Zero3Trainer final : public Trainer {
 public:
  Zero3Trainer(const chorus::train::GptModel& model, const Group& group, std::size_t prefetch)
      : model_(model),
        zero_(model.parameters(), chorus::train::gpt_units(model), group, adam,
              chorus::train::Zero3Options{.prefetch = prefetch}) {}
  void step(const at::Tensor& tokens, const at::Tensor& targets) override {
    zero_.zero_grad();
    zero_.begin_step();
    chorus::train::gpt_loss(model_, zero_, tokens, targets).backward();
    zero_.finish_step();
    zero_.step();
  }
  Held held() const override {
    const auto m = zero_.memory();
    return {m.parameters, m.gradients, m.optimizer_state, m.peak_gathered};
  }

 private:
  const chorus::train::GptModel& model_;
  chorus::train::Zero3 zero_;
};

std::unique_ptr<Trainer> make_trainer(const Options& o, const chorus::train::GptModel& model,
                                      const Group& group) {
  if (o.strategy == "ddp") return std::make_unique<DdpTrainer>(model, group, o.private_buckets);
  if (o.strategy == "zero3")
    return std::make_unique<Zero3Trainer>(model, group, static_cast<std::size_t>(o.prefetch));
  return std::make_unique<Zero12Trainer>(model, group, o.strategy == "zero1" ? 1 : 2,
                                         o.private_buckets);
}

/// PARALLEL.md section 3, fp32 Adam (K = 8), for `params` elements over d ranks.
double formula_bytes(const std::string& strategy, double params, double d) {
  if (strategy == "ddp") return 16 * params;
  if (strategy == "zero1") return 8 * params + 8 * params / d;
  if (strategy == "zero2") return 4 * params + 12 * params / d;
  return 16 * params / d;
}

struct Measured {
  Held held;
  std::int64_t params = 0, held_bytes = 0, build_peak = 0, peak = 0;
  std::vector<double> step_ms;
};

Measured train(const Options& o, chorus::Communicator& world,
               chorus::bench::CountingAllocator& counter) {
  torch::manual_seed(static_cast<std::uint64_t>(o.seed) * 1000 + world.rank());
  const at::Tensor tokens = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
  const at::Tensor targets = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
  const std::int64_t base = counter.current();
  counter.reset_peak();
  const chorus::train::GptConfig config{.layers = o.layers,
                                        .hidden = o.hidden,
                                        .heads = o.heads,
                                        .vocab = 256,
                                        .sequence = o.seq,
                                        .seed = static_cast<std::uint64_t>(o.seed)};
  chorus::train::MeshOptions mesh_options;
  mesh_options.degrees.dp = world.size();  // tp = cp = 1: groups of one rank
  const chorus::train::Mesh mesh(world, mesh_options);
  const chorus::train::GptModel model(config, mesh.tp(), mesh.cp());
  Measured m;
  for (const auto& p : model.parameters()) m.params += p.numel();
  const std::unique_ptr<Trainer> trainer = make_trainer(o, model, mesh.dp());
  m.build_peak = counter.peak() - base;
  if (o.budget_mib > 0) counter.set_limit(base + (o.budget_mib << 20));
  for (std::int64_t step = 0; step < o.warmup + o.steps; ++step) {
    if (step == o.warmup) counter.reset_peak();
    const auto start = Clock::now();
    trainer->step(tokens, targets);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (step >= o.warmup) m.step_ms.push_back(ms);
  }
  m.peak = counter.peak() - base;
  m.held_bytes = counter.current() - base;
  m.held = trainer->held();
  return m;
}

void report(const Options& o, chorus::Communicator& world, const Measured& m) {
  using chorus::bench::median;
  double times[3] = {median(m.step_ms), *std::min_element(m.step_ms.begin(), m.step_ms.end()),
                     *std::max_element(m.step_ms.begin(), m.step_ms.end())};
  world.all_reduce(times, times, 3, chorus::DataType::Float64, chorus::ReduceOp::Max);
  std::int64_t bytes[7] = {m.held.parameters,   m.held.gradients, m.held.optimizer_state,
                           m.held_bytes,        m.build_peak,     m.peak,
                           m.held.gathered_peak};
  world.all_reduce(bytes, bytes, 7, chorus::DataType::Int64, chorus::ReduceOp::Max);
  if (world.rank() != 0) return;
  const double formula =
      formula_bytes(o.strategy, static_cast<double>(m.params), static_cast<double>(world.size()));
  std::cout << std::fixed << std::setprecision(3) << "zero_bench strategy=" << o.strategy
            << " dp=" << world.size() << " layers=" << o.layers << " hidden=" << o.hidden
            << " heads=" << o.heads << " seq=" << o.seq << " batch=" << o.batch
            << " threads=" << o.threads << " params=" << m.params << " param_bytes=" << bytes[0]
            << " grad_bytes=" << bytes[1] << " optimizer_bytes=" << bytes[2]
            << " held_bytes=" << bytes[3] << " formula_bytes=" << static_cast<std::int64_t>(formula)
            << " build_peak_bytes=" << bytes[4] << " peak_bytes=" << bytes[5]
            << " gathered_peak_bytes=" << bytes[6] << " step_ms_median=" << times[0]
            << " step_ms_min=" << times[1] << " step_ms_max=" << times[2] << std::endl;
}

/// The first line of an exception's message (c10::Error appends a backtrace).
std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

int main(int argc, char** argv) {
  auto& counter = chorus::bench::CountingAllocator::install();
  const Options o = parse(argc, argv);
  std::optional<chorus::Communicator> world;
  try {
    torch::set_num_threads(static_cast<int>(o.threads));
    world.emplace(chorus::bench::connect());
    report(o, *world, train(o, *world, counter));
    return 0;
  } catch (const std::exception& e) {
    const std::string line = first_line(e);
    const bool over = line.find("counting allocator: over the limit") != std::string::npos;
    const int rank = world ? world->rank() : 0;
    if (over) {
      std::cerr << "zero_bench: rank " << rank << ": over the budget of " << o.budget_mib
                << " MiB (" << line << ")" << std::endl;
    } else {
      std::cerr << "zero_bench: rank " << rank << ": " << line << std::endl;
    }
    if (world) world->abort();  // peers waiting on this rank fail now, naming it
    std::_Exit(over ? 3 : 1);
  }
}
