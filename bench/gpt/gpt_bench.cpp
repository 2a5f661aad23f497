// gpt_bench: the GPT model's training speed and activation memory at one layout.
//
//   gpt_bench [--tp T] [--sequence-parallel] [--layers L] [--hidden H] [--heads A] [--seq S]
//             [--batch B] [--steps N] [--warmup W] [--threads K] [--seed X]
//
// Run alone (one process) or under chorusrun (dp = world / T). Tokens are random bytes, the
// same on the ranks of a tp group. Prints one line on rank 0:
//
//   gpt_bench tp=T sp=0|1 dp=D layers=L hidden=H heads=A seq=S batch=B threads=K
//             tokens_per_s=... step_ms_median=... step_ms_min=... step_ms_max=...
//             activation_bytes_per_layer=... ledger_bytes_per_step=... ledger_calls_per_step=...
//
// activation_bytes_per_layer: the bytes torch holds for backward per block, measured with a
// counting CPU allocator (counting_allocator.hpp): the bytes alive after the blocks' forward
// minus those alive after the embedding, over L (each block's output counted, its input
// not: the previous block's output). The ledger figures are one step's logical collectives on
// this rank (rank 0). step_ms: wall time of zero_grad, forward, backward, the gradient
// reductions (dp average, tp sum of SP's partial gradients) and an SGD step; the slowest
// rank's median over the timed steps.
#include "counting_allocator.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int tp = 1;
  bool sequence_parallel = false;
  std::int64_t layers = 2, hidden = 512, heads = 8, seq = 128, batch = 8;
  int steps = 10, warmup = 2, threads = 1;
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "gpt_bench: " << problem
            << "\nusage: gpt_bench [--tp T] [--sequence-parallel] [--layers L] [--hidden H] "
               "[--heads A] [--seq S] [--batch B] [--steps N] [--warmup W] [--threads K] "
               "[--seed X]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--sequence-parallel") {
      o.sequence_parallel = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const char* text = argv[++i];
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0) usage(flag + " takes a number, not " + text);
    if (flag == "--tp")
      o.tp = static_cast<int>(value);
    else if (flag == "--layers")
      o.layers = value;
    else if (flag == "--hidden")
      o.hidden = value;
    else if (flag == "--heads")
      o.heads = value;
    else if (flag == "--seq")
      o.seq = value;
    else if (flag == "--batch")
      o.batch = value;
    else if (flag == "--steps")
      o.steps = static_cast<int>(value);
    else if (flag == "--warmup")
      o.warmup = static_cast<int>(value);
    else if (flag == "--threads")
      o.threads = static_cast<int>(value);
    else if (flag == "--seed")
      o.seed = static_cast<std::uint64_t>(value);
    else
      usage("unknown option " + flag);
  }
  if (o.tp < 1 || o.layers < 1 || o.steps < 1 || o.threads < 1) usage("a value is out of range");
  return o;
}

chorus::Communicator connect() {
  if (std::getenv("RANK") != nullptr) return chorus::Communicator::init_from_env();
  chorus::InitOptions single;
  single.store_address = "127.0.0.1:0";
  return chorus::Communicator::init(single);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The bytes held for backward per block (see the file comment).
std::int64_t activation_bytes_per_layer(const chorus::train::GptModel& model,
                                        const at::Tensor& tokens,
                                        const chorus::bench::CountingAllocator& counter) {
  const at::Tensor embedded = model.embed(tokens);
  const std::int64_t before = counter.current();
  const at::Tensor out = model.run_blocks(embedded, 0, model.config().layers);
  const std::int64_t after = counter.current();
  return (after - before) / model.config().layers;
}

}  // namespace

int main(int argc, char** argv) {
  auto& counter = chorus::bench::CountingAllocator::install();
  const Options o = parse(argc, argv);
  try {
    torch::set_num_threads(o.threads);
    chorus::Communicator world = connect();
    if (world.size() % o.tp != 0) usage("--tp does not divide the world");
    chorus::train::MeshOptions mesh_options;
    mesh_options.degrees.tp = o.tp;
    mesh_options.degrees.dp = world.size() / o.tp;
    chorus::train::Mesh mesh(world, mesh_options);
    chorus::train::GptConfig config{.layers = o.layers,
                                    .hidden = o.hidden,
                                    .heads = o.heads,
                                    .vocab = 256,
                                    .sequence = o.seq,
                                    .sequence_parallel = o.sequence_parallel,
                                    .seed = o.seed};
    chorus::train::GptModel model(config, mesh.tp());
    torch::manual_seed(static_cast<std::uint64_t>(o.seed) * 1000 + mesh.coordinates().dp);
    const at::Tensor tokens = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
    const at::Tensor targets = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);

    const std::int64_t activations = activation_bytes_per_layer(model, tokens, counter);

    chorus::train::GradientReducer reducer(model.parameters(), mesh.dp());
    torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1e-3));
    std::vector<double> step_ms;
    std::size_t ledger_bytes = 0, ledger_calls = 0;
    for (int step = 0; step < o.warmup + o.steps; ++step) {
      const bool ledgered = step == o.warmup;
      if (ledgered) mesh.ledger()->enable();
      const auto start = Clock::now();
      optimizer.zero_grad();
      reducer.begin_step();
      model.loss(tokens, targets).backward();
      reducer.finish_step();
      chorus::train::all_reduce_partial_gradients(model.partial_gradient_parameters(), mesh.tp());
      optimizer.step();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (step >= o.warmup) step_ms.push_back(ms);
      if (ledgered) {
        mesh.ledger()->disable();
        for (const auto& entry : mesh.ledger()->take()) {
          ledger_bytes += entry.bytes;
          ledger_calls += 1;
        }
      }
    }
    double times[3] = {median(step_ms), *std::min_element(step_ms.begin(), step_ms.end()),
                       *std::max_element(step_ms.begin(), step_ms.end())};
    world.all_reduce(times, times, 3, chorus::DataType::Float64, chorus::ReduceOp::Max);
    if (world.rank() == 0) {
      const double tokens_per_step =
          static_cast<double>(o.seq * o.batch) * static_cast<double>(mesh.layout().dp);
      std::printf(
          "gpt_bench tp=%d sp=%d dp=%d layers=%lld hidden=%lld heads=%lld seq=%lld batch=%lld "
          "threads=%d tokens_per_s=%.1f step_ms_median=%.3f step_ms_min=%.3f step_ms_max=%.3f "
          "activation_bytes_per_layer=%lld ledger_bytes_per_step=%zu ledger_calls_per_step=%zu\n",
          o.tp, o.sequence_parallel ? 1 : 0, mesh.layout().dp, static_cast<long long>(o.layers),
          static_cast<long long>(o.hidden), static_cast<long long>(o.heads),
          static_cast<long long>(o.seq), static_cast<long long>(o.batch), o.threads,
          tokens_per_step / (times[0] / 1000.0), times[0], times[1], times[2],
          static_cast<long long>(activations), ledger_bytes, ledger_calls);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "gpt_bench: " << e.what() << "\n";
    return 1;
  }
}
