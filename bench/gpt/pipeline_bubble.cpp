// pipeline_bubble: a pipeline schedule's measured bubble under --synthetic-compute, beside the
// verifier's prediction and the textbook formula (docs/training.md, "Pipeline parallelism").
//
//   chorusrun -n P pipeline_bubble --schedule S --micro-batches M [--virtual-stages V]
//                                  [--synthetic-compute MS] [--steps N]
//
// Every pipeline rank runs the schedule's actions with each computation replaced by a sleep
// of MS milliseconds per unit cost (forward, input gradient and weight gradient 1 unit each, a
// full backward 2) while the activations and gradients between the stages are real messages,
// so ranks sharing cores show the schedule's own bubble. Each step starts after a barrier on
// the pipeline group; the bubble is 1 − Σ busy / (p · makespan) from the actions' recorded
// times. Rank 0 prints one line: schedule, p, m, v, the median measured bubble over the steps
// after the first, the verifier's, the formula's, and the median step time.
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
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "pipeline_bubble: %s\nusage: pipeline_bubble --schedule gpipe|1f1b|interleaved|"
               "zb-h1 --micro-batches M [--virtual-stages V] [--synthetic-compute MS] "
               "[--steps N]\n",
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
    else
      usage("unknown option " + flag);
  }
  if (o.micro_batches < 1 || o.virtual_stages < 0 || !(o.unit_ms > 0) || o.steps < 2)
    usage("--micro-batches and --synthetic-compute must be positive, --steps at least 2");
  if (o.virtual_stages == 0) o.virtual_stages = o.schedule == "interleaved" ? 2 : 1;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace train = chorus::train;
  const Options o = parse(argc, argv);
  try {
    chorus::Communicator world = chorus::Communicator::init_from_env();
    const int p = world.size();
    const train::Mesh mesh(world, {.degrees = {.pp = p}, .embedding_group = true});
    const int r = mesh.coordinates().pp;
    std::optional<train::Group> embedding;
    if (p > 1 && (r == 0 || r == p - 1)) embedding = mesh.embedding();
    train::PipelineOptions options;
    options.schedule = {train::schedule_kind(o.schedule), p, o.micro_batches, o.virtual_stages};
    options.synthetic_compute = o.unit_ms / 1000;
    const train::GptConfig config{.layers = p * o.virtual_stages,
                                  .hidden = 64,
                                  .heads = 4,
                                  .vocab = 32,
                                  .sequence = 32,
                                  .seed = 1};
    train::GptPipeline pipeline(config, {mesh.pp(), mesh.tp(), embedding, std::nullopt}, options);
    const at::Tensor tokens = at::zeros({32, 2 * o.micro_batches}, at::kLong);
    const auto micro_batches = train::split_micro_batches(tokens, tokens, o.micro_batches);
    std::vector<double> bubbles, seconds;
    for (int step = 0; step < o.steps; ++step) {
      chorus::Communicator pp = mesh.pp().comm;
      pp.barrier();
      const auto start = std::chrono::steady_clock::now();
      pipeline.forward_backward(micro_batches);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double bubble = train::measured_bubble(mesh.pp(), pipeline.last_record());
      if (step == 0) continue;  // warm-up
      bubbles.push_back(bubble);
      seconds.push_back(took);
    }
    if (world.rank() == 0)
      std::printf("%s p %d m %d v %d: measured %.4f verifier %.4f formula %.4f step %.1f ms\n",
                  o.schedule.c_str(), p, o.micro_batches, o.virtual_stages, median(bubbles),
                  pipeline.report().bubble, train::textbook_bubble(options.schedule),
                  1000 * median(seconds));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_bubble: %s\n", e.what());
    return 1;
  }
}
