// pipeline_bubble: a pipeline schedule's measured bubble, beside the verifier's prediction and
// the textbook formula (docs/training.md, "Pipeline parallelism"), with the step's tokens/s
// and the activation bytes each stage holds at its peak.
//
//   chorusrun -n P pipeline_bubble --schedule S --micro-batches M [--virtual-stages V]
//                                  [--synthetic-compute MS] [--steps N] [--hidden H]
//                                  [--layers-per-chunk L]
//
// With --synthetic-compute MS above 0 (20 by default) every pipeline rank runs the schedule's
// actions with each computation replaced by a sleep of MS milliseconds per unit cost (forward,
// input gradient and weight gradient 1 unit each, a full backward 2) while the activations and
// gradients between the stages are real messages, so ranks sharing cores show the schedule's
// own bubble. With --synthetic-compute 0 the computations are real (a GPT of hidden H and L
// blocks per chunk; the defaults make a tiny one for the synthetic runs). Each step starts
// after a barrier on the pipeline group; the bubble is 1 − Σ busy / (p · makespan) from the
// actions' recorded times. Rank 0 prints one line: schedule, p, m, v, the median measured
// bubble over the steps after the first, the verifier's, the formula's, the median step time,
// tokens/s at that time, then each stage's peak activation bytes (the most bytes torch held
// during a step beyond what it held before it: a counting allocator, counting_allocator.hpp)
// and that peak as micro-batches' worth of activations held: (peak - fixed) / per
// micro-batch, both measured on the stage from GPipe steps of one and of two micro-batches of
// the same shape (per micro-batch: their difference; fixed: the rest of the one-micro-batch
// peak, a backward's transient buffers).
#include "bench_process.hpp"
#include "counting_allocator.hpp"  // tools/chorus-train

#include <chorus/communicator.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string schedule = "1f1b";
  int micro_batches = 4;
  int virtual_stages = 0;  // 0: 2 for interleaved, else 1
  double unit_ms = 20;
  int steps = 4;
  int hidden = 64;
  int layers_per_chunk = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "pipeline_bubble: %s\nusage: pipeline_bubble --schedule gpipe|1f1b|interleaved|"
               "zb-h1 --micro-batches M [--virtual-stages V] [--synthetic-compute MS] "
               "[--steps N] [--hidden H] [--layers-per-chunk L]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--schedule")
      o.schedule = value;
    else if (flag == "--micro-batches")
      o.micro_batches = std::atoi(value.c_str());
    else if (flag == "--virtual-stages")
      o.virtual_stages = std::atoi(value.c_str());
    else if (flag == "--synthetic-compute")
      o.unit_ms = std::atof(value.c_str());
    else if (flag == "--steps")
      o.steps = std::atoi(value.c_str());
    else if (flag == "--hidden")
      o.hidden = std::atoi(value.c_str());
    else if (flag == "--layers-per-chunk")
      o.layers_per_chunk = std::atoi(value.c_str());
    else
      usage("unknown option " + flag);
  }
  if (o.micro_batches < 1 || o.virtual_stages < 0 || !(o.unit_ms >= 0) || o.steps < 2 ||
      o.hidden < 4 || o.hidden % 4 != 0 || o.layers_per_chunk < 1)
    usage(
        "--micro-batches and --layers-per-chunk must be positive, --synthetic-compute at least "
        "0, --steps at least 2, --hidden a positive multiple of 4 (4 heads)");
  if (o.virtual_stages == 0) o.virtual_stages = o.schedule == "interleaved" ? 2 : 1;
  return o;
}

using chorus::bench::median;

namespace train = chorus::train;

/// A pipeline of `schedule` over the pipeline group (one stage per rank), `blocks_per_chunk`
/// blocks in each of its `virtual_stages` chunks per rank.
train::GptPipeline make_pipeline(const train::Mesh& mesh, const Options& o,
                                 const std::string& schedule, int micro_batches, int virtual_stages,
                                 int blocks_per_chunk) {
  const int p = mesh.layout().pp;
  const int r = mesh.coordinates().pp;
  std::optional<train::Group> embedding;
  if (p > 1 && (r == 0 || r == p - 1)) embedding = mesh.embedding();
  train::PipelineOptions options;
  options.schedule = {train::schedule_kind(schedule), p, micro_batches, virtual_stages};
  options.synthetic_compute = o.unit_ms / 1000;
  const train::GptConfig config{.layers = p * virtual_stages * blocks_per_chunk,
                                .hidden = o.hidden,
                                .heads = 4,
                                .vocab = 32,
                                .sequence = 32,
                                .seed = 1};
  return train::GptPipeline(config, {mesh.pp(), mesh.tp(), embedding, std::nullopt}, options);
}

/// Micro-batches of two samples each (tokens and targets alike, zeros).
std::vector<train::MicroBatch> micro_batches_of(int count) {
  const at::Tensor tokens = at::zeros({32, 2 * count}, at::kLong);
  return train::split_micro_batches(tokens, tokens, count);
}

/// The bytes torch held at the peak of one forward_backward beyond those held before it.
std::int64_t peak_bytes_of_step(train::GptPipeline& pipeline,
                                const std::vector<train::MicroBatch>& micro_batches,
                                chorus::bench::CountingAllocator& counter) {
  const std::int64_t before = counter.current();
  counter.reset_peak();
  pipeline.forward_backward(micro_batches);
  return counter.peak() - before;
}

}  // namespace

int main(int argc, char** argv) {
  auto& counter = chorus::bench::CountingAllocator::install();
  const Options o = parse(argc, argv);
  try {
    chorus::Communicator world = chorus::Communicator::init_from_env();
    const int p = world.size();
    const train::Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    // What one micro-batch's activations cost this stage: its peak in a GPipe step of two
    // micro-batches less that of one (each run twice: the first allocates the gradients), with
    // as many blocks per rank as the schedule's chunks hold together.
    std::int64_t gpipe_peaks[2] = {0, 0};
    for (int m = 1; m <= 2; ++m) {
      train::GptPipeline gpipe =
          make_pipeline(mesh, o, "gpipe", m, 1, o.virtual_stages * o.layers_per_chunk);
      const auto batches = micro_batches_of(m);
      for (int run = 0; run < 2; ++run)
        gpipe_peaks[m - 1] = peak_bytes_of_step(gpipe, batches, counter);
    }
    const std::int64_t micro_batch_bytes = gpipe_peaks[1] - gpipe_peaks[0];
    const std::int64_t fixed_bytes = gpipe_peaks[0] - micro_batch_bytes;
    train::GptPipeline pipeline =
        make_pipeline(mesh, o, o.schedule, o.micro_batches, o.virtual_stages, o.layers_per_chunk);
    const auto micro_batches = micro_batches_of(o.micro_batches);
    std::vector<double> bubbles, seconds;
    std::int64_t peak = 0;
    for (int step = 0; step < o.steps; ++step) {
      chorus::Communicator pp = mesh.pp().comm;
      pp.barrier();
      const auto start = std::chrono::steady_clock::now();
      const std::int64_t step_peak = peak_bytes_of_step(pipeline, micro_batches, counter);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double bubble = train::measured_bubble(mesh.pp(), pipeline.last_record());
      if (step == 0) continue;  // warm-up (and the gradients' first allocation)
      peak = std::max(peak, step_peak);
      bubbles.push_back(bubble);
      seconds.push_back(took);
    }
    // Per stage: the peak, and the micro-batches' worth of activations it held.
    const double held = static_cast<double>(peak - fixed_bytes) /
                        static_cast<double>(std::max<std::int64_t>(micro_batch_bytes, 1));
    std::vector<std::int64_t> peaks(static_cast<std::size_t>(p));
    std::vector<double> helds(static_cast<std::size_t>(p));
    world.all_gather(&peak, peaks.data(), 1, chorus::DataType::Int64);
    world.all_gather(&held, helds.data(), 1, chorus::DataType::Float64);
    if (world.rank() == 0) {
      const double step_seconds = median(seconds);
      const double tokens = 32.0 * 2 * o.micro_batches;
      std::string stage_peaks, stage_helds;
      char text[32];
      for (int r = 0; r < p; ++r) {
        // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict overlap for
        // `"literal" + std::string`.
        if (r) stage_peaks.append(",");
        stage_peaks.append(std::to_string(peaks[static_cast<std::size_t>(r)]));
        std::snprintf(text, sizeof(text), "%s%.2f", r ? "," : "",
                      helds[static_cast<std::size_t>(r)]);
        stage_helds += text;
      }
      std::printf(
          "%s p %d m %d v %d: measured %.4f verifier %.4f formula %.4f step %.1f ms tokens/s "
          "%.0f peak %s held %s\n",
          o.schedule.c_str(), p, o.micro_batches, o.virtual_stages, median(bubbles),
          pipeline.report().bubble, train::textbook_bubble(pipeline.schedule().options),
          1000 * step_seconds, tokens / step_seconds, stage_peaks.c_str(), stage_helds.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_bubble: %s\n", e.what());
    return 1;
  }
}
