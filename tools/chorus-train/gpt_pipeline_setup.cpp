// The GPT run's pipeline options from the command line (gpt_pipeline_setup.hpp).
#include "gpt_pipeline_setup.hpp"

#include "counting_allocator.hpp"
#include "run_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/pipeline_partition.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include "plan/model.hpp"

#include <torch/torch.h>

#include <cstdio>
#include <fstream>

namespace chorus::train_tool {
namespace {

/// Per block (forward + backward) and the embedding's and head's times, in nanoseconds, from
/// `profile` (its layer lines, else its one block's times for every block).
std::vector<std::int64_t> block_costs(const plan::ComputeProfile& profile, std::int64_t layers,
                                      const std::string& source) {
  const auto ns = [](double ms) { return static_cast<std::int64_t>(ms * 1e6); };
  const std::size_t n = profile.block_forward_ms.size();
  require_argument(n == 0 || n == static_cast<std::size_t>(layers),
                   "--partition time: " + source + " has times of " + std::to_string(n) +
                       " blocks for --layers " + std::to_string(layers));
  std::vector<std::int64_t> costs;
  for (std::size_t i = 0; i < static_cast<std::size_t>(layers); ++i)
    costs.push_back(n == 0 ? ns(profile.layer_forward_ms + profile.layer_backward_ms)
                           : ns(profile.block_forward_ms[i] + profile.block_backward_ms[i]));
  costs.push_back(ns(profile.embedding_ms));
  costs.push_back(ns(profile.head_ms));
  return costs;
}

/// --partition time: blocks per virtual stage balanced by measured time, the same on every
/// rank of `comm` (rank 0's profile).
std::vector<std::int64_t> time_partition(const Options& options, const train::GptConfig& config,
                                         int stages, Communicator* comm) {
  std::vector<std::int64_t> costs(static_cast<std::size_t>(config.layers) + 2, 0);
  if (comm == nullptr || comm->rank() == 0) {
    costs =
        options.compute_profile.empty()
            ? block_costs(profile_gpt_blocks(options, config), config.layers, "the profiling run")
            : block_costs(plan::load_compute_profile_file(options.compute_profile), config.layers,
                          options.compute_profile);
  }
  if (comm != nullptr)
    comm->broadcast(costs.data(), costs.data(), costs.size(), DataType::Int64, 0);
  const std::int64_t head = costs.back(), embedding = costs[costs.size() - 2];
  costs.resize(costs.size() - 2);
  return train::balanced_partition(costs, stages, embedding, head);
}

/// --synthetic-compute: each virtual stage's computations in units of one block's forward at
/// micro-batch 1 and tp 1 (the planner's FLOP counts), which last options.synthetic_compute ms.
std::vector<train::ActionCosts> synthetic_costs(const Options& options,
                                                const train::GptConfig& config,
                                                const std::vector<std::int64_t>& layers) {
  plan::ModelConfig model;
  model.layers = config.layers;
  model.hidden = config.hidden;
  model.heads = config.heads;
  model.vocab = config.vocab;
  model.seq = config.sequence;
  const double unit = plan::block_forward_flops(model, plan::Layout{});
  plan::Layout layout;
  layout.tp = options.tp;
  layout.micro_batch = options.batch / options.micro_batches;
  const double block = plan::block_forward_flops(model, layout) / unit;
  const double again = options.recompute == Recomputation::Full ? block
                       : options.recompute == Recomputation::Selective
                           ? plan::attention_core_flops(model, layout) / unit
                           : 0;
  const double head = plan::head_forward_flops(model, layout) / unit;
  std::vector<train::ActionCosts> out;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    const double blocks = static_cast<double>(layers[s]);
    const double forward = blocks * block + (s + 1 == layers.size() ? head : 0);
    out.push_back({forward, forward + blocks * again, forward});  // backward: twice the forward
  }
  return out;
}

}  // namespace

train::PipelineOptions pipeline_options(const Options& options, const train::GptConfig& config,
                                        Communicator* comm) {
  train::PipelineOptions o;
  o.schedule = {train::schedule_kind(options.schedule), options.pp, options.micro_batches,
                options.virtual_stages};
  const int stages = options.pp * options.virtual_stages;
  if (options.partition == "list") o.layers_per_stage = options.partition_layers;
  if (options.partition == "time")
    o.layers_per_stage = time_partition(options, config, stages, comm);
  if (options.synthetic_compute > 0) {
    o.synthetic_compute = options.synthetic_compute / 1000;
    o.stage_costs = synthetic_costs(options, config, train::gpt_stage_layers(config, o));
  }
  return o;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  require_argument(out.good(), "'" + path + "' cannot be written");
}

void write_run_timeline(const Options& options, const train::GptPipeline& pipeline,
                        const train::Mesh& mesh, const Communicator& world) {
  const auto rows = train::gather_computations(mesh.pp(), pipeline.last_record());
  if (world.rank() != 0) return;
  char title[200];
  std::snprintf(title, sizeof title, "%s: p %d, m %d, v %d; the last step's computations (s)",
                options.schedule.c_str(), options.pp, options.micro_batches,
                options.virtual_stages);
  write_file(options.timeline_svg, train::render_timeline_svg(rows, title));
}

std::int64_t start_memory_watch() {
  auto& counter = bench::CountingAllocator::install();  // installed already: the same one
  counter.reset_peak();
  return counter.current();
}

void report_peak_memory(const Communicator& world, std::int64_t held,
                        const std::vector<at::Tensor>& parameters) {
  const auto& counter = bench::CountingAllocator::install();
  double bytes =
      static_cast<double>(counter.peak() - held + bench::unseen_state_bytes(parameters, counter));
  double most = 0;
  Communicator comm = world;
  comm.all_reduce(&bytes, &most, 1, DataType::Float64, ReduceOp::Max);
  say(world, "memory peak_bytes=" + std::to_string(static_cast<std::int64_t>(most)));
}

}  // namespace chorus::train_tool
