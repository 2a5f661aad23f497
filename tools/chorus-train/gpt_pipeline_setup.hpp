// The GPT run's pipeline options from the command line: the partition (--partition params,
// time or a list), synthetic compute (--synthetic-compute), the compute profile chorus-plan
// reads (--write-compute-profile) and the SVG timelines (--timeline-svg). See
// docs/training.md, "Pipeline parallelism", and docs/planner.md, "Compute profiles".
#pragma once

#include "gpt_profile.hpp"
#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline.hpp>

#include "plan/compute_profile.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train_tool {

/// The pipeline's options for `config` under `options`: the schedule; the blocks per virtual
/// stage of --partition (params: left to the pipeline's balance by parameter count; time:
/// balanced by each block's forward-and-backward time with the embedding's on the first and
/// the head's on the last stage, from --compute-profile or from a profiling run on rank 0 of
/// `comm`, whose partition every rank then takes; a list: as given, checked when the pipeline
/// is built); and, with --synthetic-compute, the per-stage costs to sleep. `comm` may be null
/// (the dry run): the profiling run is then this process's. Collective over `comm` with
/// --partition time.
train::PipelineOptions pipeline_options(const Options& options, const train::GptConfig& config,
                                        Communicator* comm);

/// Writes `text` to `path`; InvalidArgument naming the path when it cannot.
void write_file(const std::string& path, const std::string& text);

/// --timeline-svg on a real run: every pipeline rank's computations in the pipeline's last
/// step, drawn as an SVG (render_timeline_svg) that world rank 0 writes. Collective over the
/// pipeline group.
void write_run_timeline(const Options& options, const train::GptPipeline& pipeline,
                        const train::Mesh& mesh, const Communicator& world);

/// --peak-memory (the counting allocator installed): the bytes torch holds now, the peak
/// restarted from them. Call it before the first step.
std::int64_t start_memory_watch();

/// --peak-memory: prints "memory peak_bytes=P": the largest over `world`'s ranks of the peak
/// bytes torch held since start_memory_watch() returned `held`, beyond `held`, plus what of
/// the rank's `parameters` and their gradients that peak did not see (unseen_state_bytes: the
/// parameters and gradient buckets held before, host-shared buckets). So P counts the model
/// states and activations chorus-plan predicts, not the corpus. Collective over `world`.
void report_peak_memory(const Communicator& world, std::int64_t held,
                        const std::vector<at::Tensor>& parameters);

}  // namespace chorus::train_tool
