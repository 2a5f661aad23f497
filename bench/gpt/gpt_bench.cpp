// gpt_bench: the GPT model's training speed and activation memory at one layout.
//
//   gpt_bench [--tp T] [--cp U] [--sequence-parallel] [--layers L] [--hidden H] [--heads A] [--seq
//   S]
//             [--batch B] [--steps N] [--warmup W] [--threads K] [--seed X]
//
// Run alone (one process) or under chorusrun (dp = world / (T·U)). Tokens are random bytes,
// the same on the ranks of a tp × cp block. Prints one line on rank 0:
//
//   gpt_bench tp=T cp=U sp=0|1 dp=D layers=L hidden=H heads=A seq=S batch=B threads=K
//             tokens_per_s=... step_ms_median=... step_ms_min=... step_ms_max=...
//             activation_bytes_per_layer=... ledger_bytes_per_step=... ledger_calls_per_step=...
//
// activation_bytes_per_layer: the bytes torch holds for backward per block, measured with a
// counting CPU allocator (counting_allocator.hpp): the bytes alive after the blocks' forward
// minus those alive after the embedding, over L (each block's output counted, its input
// not: the previous block's output). The ledger figures are one step's logical collectives on
// this rank (rank 0). step_ms: wall time of zero_grad, forward, backward, the gradient
// reductions (sum over cp and average over dp, tp sum of SP's partial gradients) and an SGD
// step; the slowest
// rank's median over the timed steps.
#include "bench_process.hpp"
#include "counting_allocator.hpp"  // tools/chorus-train

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool sequence_parallel = false;
  std::int64_t tp = 1, cp = 1, layers = 2, hidden = 512, heads = 8, seq = 128, batch = 8;
  std::int64_t steps = 10, warmup = 2, threads = 1, seed = 1;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr
      << "gpt_bench: " << problem
      << "\nusage: gpt_bench [--tp T] [--cp U] [--sequence-parallel] [--layers L] [--hidden H] "
         "[--heads A] [--seq S] [--batch B] [--steps N] [--warmup W] [--threads K] "
         "[--seed X]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  chorus::bench::parse_flags(argc, argv,
                             {.switches = {{"--sequence-parallel", &o.sequence_parallel}},
                              .words = {},
                              .numbers = {{"--tp", &o.tp},
                                          {"--cp", &o.cp},
                                          {"--layers", &o.layers},
                                          {"--hidden", &o.hidden},
                                          {"--heads", &o.heads},
                                          {"--seq", &o.seq},
                                          {"--batch", &o.batch},
                                          {"--steps", &o.steps},
                                          {"--warmup", &o.warmup},
                                          {"--threads", &o.threads},
                                          {"--seed", &o.seed}}},
                             usage);
  if (o.tp < 1 || o.cp < 1 || o.layers < 1 || o.steps < 1 || o.threads < 1 || o.tp > 4096 ||
      o.cp > 4096 || o.threads > 256)
    usage("a value is out of range");
  return o;
}

using chorus::bench::connect, chorus::bench::median;

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
    torch::set_num_threads(static_cast<int>(o.threads));
    chorus::Communicator world = connect();
    if (world.size() % (o.tp * o.cp) != 0) usage("--tp x --cp does not divide the world");
    chorus::train::MeshOptions mesh_options;
    mesh_options.degrees.tp = static_cast<int>(o.tp);
    mesh_options.degrees.cp = static_cast<int>(o.cp);
    mesh_options.degrees.dp = world.size() / static_cast<int>(o.tp * o.cp);
    chorus::train::Mesh mesh(world, mesh_options);
    chorus::train::GptConfig config{.layers = o.layers,
                                    .hidden = o.hidden,
                                    .heads = o.heads,
                                    .vocab = 256,
                                    .sequence = o.seq,
                                    .sequence_parallel = o.sequence_parallel,
                                    .seed = static_cast<std::uint64_t>(o.seed)};
    chorus::train::GptModel model(config, mesh.tp(), mesh.cp());
    torch::manual_seed(static_cast<std::uint64_t>(o.seed) * 1000 + mesh.coordinates().dp);
    const at::Tensor tokens = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
    const at::Tensor targets = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);

    const std::int64_t activations = activation_bytes_per_layer(model, tokens, counter);

    // Summed over cp (each cp rank's gradient covers its tokens), averaged over dp.
    chorus::train::ReducerOptions reducer_options;
    reducer_options.divisor = mesh.layout().dp;
    chorus::train::GradientReducer reducer(model.parameters(), mesh.data_context(),
                                           reducer_options);
    torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1e-3));
    std::vector<double> step_ms;
    std::size_t ledger_bytes = 0, ledger_calls = 0;
    for (std::int64_t step = 0; step < o.warmup + o.steps; ++step) {
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
      std::cout << std::fixed << std::setprecision(3) << "gpt_bench tp=" << o.tp << " cp=" << o.cp
                << " sp=" << (o.sequence_parallel ? 1 : 0) << " dp=" << mesh.layout().dp
                << " layers=" << o.layers << " hidden=" << o.hidden << " heads=" << o.heads
                << " seq=" << o.seq << " batch=" << o.batch << " threads=" << o.threads
                << " tokens_per_s=" << tokens_per_step / (times[0] / 1000.0)
                << " step_ms_median=" << times[0] << " step_ms_min=" << times[1]
                << " step_ms_max=" << times[2] << " activation_bytes_per_layer=" << activations
                << " ledger_bytes_per_step=" << ledger_bytes
                << " ledger_calls_per_step=" << ledger_calls << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "gpt_bench: " << e.what() << "\n";
    return 1;
  }
}
