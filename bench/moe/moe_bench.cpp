// moe_bench: the MoE GPT's training speed at one expert-parallel degree, and the MoE layer
// under forced routing skew.
//
//   moe_bench [--ep N] [--experts E] [--top-k K] [--capacity PERCENT|0 (dropless)]
//             [--layers L] [--hidden H] [--heads A] [--seq S] [--batch B] [--steps N]
//             [--warmup W] [--skew PERCENT] [--seed X]
//
// Run under chorusrun: dp = world, the experts split over ep ranks. Without --skew it trains
// the GPT (every block an MoE block; random byte tokens, B samples per rank) and prints on
// rank 0
//
//   moe_bench mode=gpt ep=N dp=D experts=E top_k=K capacity=C tokens_per_s=...
//             step_ms_median=... a2av_ms=... a2av_share=... drop_rate=...
//
// With --skew P it runs the MoE layer alone (forward and backward, B·S tokens per rank of width
// H) with its router replaced by one that sends P% of every rank's tokens to expert 0 as their
// first choice and the rest evenly (P 0: balanced), and prints mode=skew with the same fields.
//
// step_ms: the slowest rank's median wall time of a step (zero_grad, forward, backward, the
// gradient reductions, SGD). a2av_ms: the all-to-all-v of the step replayed alone with the
// step's own uneven row counts (4 per MoE layer: dispatch and combine, forward and backward),
// the slowest rank's median; a2av_share = a2av_ms / step_ms_median. drop_rate: assignments
// over capacity / all assignments in the last step, over every rank.
#include "../gpt/bench_process.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/moe.hpp>
#include <chorus/train/reducer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using chorus::train::MoeStats;

struct Options {
  std::int64_t ep = 1, experts = 8, top_k = 2, capacity = 125, layers = 2, hidden = 128;
  std::int64_t heads = 4, seq = 128, batch = 8, steps = 10, warmup = 2, skew = -1, seed = 1;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "moe_bench: " << problem
            << "\nusage: moe_bench [--ep N] [--experts E] [--top-k K] [--capacity PERCENT|0] "
               "[--layers L] [--hidden H] [--heads A] [--seq S] [--batch B] [--steps N] "
               "[--warmup W] [--skew PERCENT] [--seed X]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  chorus::bench::parse_flags(argc, argv,
                             {.switches = {},
                              .words = {},
                              .numbers = {{"--ep", &o.ep},
                                          {"--experts", &o.experts},
                                          {"--top-k", &o.top_k},
                                          {"--capacity", &o.capacity},
                                          {"--layers", &o.layers},
                                          {"--hidden", &o.hidden},
                                          {"--heads", &o.heads},
                                          {"--seq", &o.seq},
                                          {"--batch", &o.batch},
                                          {"--steps", &o.steps},
                                          {"--warmup", &o.warmup},
                                          {"--skew", &o.skew},
                                          {"--seed", &o.seed}}},
                             usage);
  if (o.ep < 1 || o.experts < 1 || o.steps < 1 || o.skew > 100) usage("a value is out of range");
  return o;
}

using chorus::bench::connect, chorus::bench::median;

double slowest(chorus::Communicator& world, double value) {
  world.all_reduce(&value, &value, 1, chorus::DataType::Float64, chorus::ReduceOp::Max);
  return value;
}

chorus::train::MoeRoutingOptions routing(const Options& o, std::int64_t group) {
  return {.top_k = static_cast<int>(o.top_k),
          .capacity_factor = static_cast<double>(o.capacity) / 100.0,
          .dropless = o.capacity == 0,
          .group_tokens = group};
}

/// One MoE layer's step traffic replayed: its dispatch counts (rows of `width` floats per
/// destination rank) through 4 all-to-all-v on `ep`; returns milliseconds.
double replay_all_to_all_v(chorus::Communicator& ep, const MoeStats& stats, std::int64_t width) {
  const std::size_t n = static_cast<std::size_t>(ep.size());
  const std::size_t local = stats.kept.size() / n;
  std::vector<std::size_t> send(n, 0), recv(n, 0), sdispl(n, 0), rdispl(n, 0);
  for (std::size_t e = 0; e < stats.kept.size(); ++e)
    send[e / local] += static_cast<std::size_t>(stats.kept[e] * width);
  ep.all_to_all(send.data(), recv.data(), 1, chorus::DataType::Uint64);
  for (std::size_t r = 1; r < n; ++r) {
    sdispl[r] = sdispl[r - 1] + send[r - 1];
    rdispl[r] = rdispl[r - 1] + recv[r - 1];
  }
  std::vector<float> out(sdispl[n - 1] + send[n - 1] + 1), in(rdispl[n - 1] + recv[n - 1] + 1);
  ep.barrier();
  const auto start = Clock::now();
  for (int pass = 0; pass < 2; ++pass) {  // dispatch, combine (and their adjoints)
    ep.all_to_all_v(out.data(), send, sdispl, in.data(), recv, rdispl, chorus::DataType::Float32);
    ep.all_to_all_v(in.data(), recv, rdispl, out.data(), send, sdispl, chorus::DataType::Float32);
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Result {
  std::vector<double> step_ms, a2av_ms;
  std::int64_t dropped = 0, assignments = 0;
};

/// Runs `step` warmup + steps times; after each timed step replays its MoE traffic.
Result measure(const Options& o, chorus::Communicator& ep, const std::function<void()>& step,
               const std::function<std::vector<MoeStats>()>& stats) {
  Result r;
  for (std::int64_t i = 0; i < o.warmup + o.steps; ++i) {
    const auto start = Clock::now();
    step();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (i < o.warmup) continue;
    r.step_ms.push_back(ms);
    double a2av = 0;
    r.dropped = r.assignments = 0;
    for (const MoeStats& s : stats()) {
      a2av += replay_all_to_all_v(ep, s, o.hidden);
      r.dropped += s.dropped;
      r.assignments += s.assignments;
    }
    r.a2av_ms.push_back(a2av);
  }
  return r;
}

/// The MoE layer alone, its router forcing o.skew % of the tokens to expert 0 (see the file
/// comment): expert 0's router row reads feature 0, expert e's feature e; a token's first
/// choice gets a large feature.
Result skew_run(const Options& o, chorus::train::Mesh& mesh) {
  const std::int64_t tokens = o.seq * o.batch, h = o.hidden, e = o.experts;
  chorus::train::MoeLayer layer({.hidden = h,
                                 .ffn = 4 * h,
                                 .experts = e,
                                 .routing = routing(o, tokens),
                                 .seed = static_cast<std::uint64_t>(o.seed)},
                                mesh);
  {
    torch::NoGradGuard no_grad;
    auto w = layer.router_weight();
    w.zero_();
    for (std::int64_t i = 0; i < e && i < h; ++i) w[i][i] = 1.0;
  }
  torch::manual_seed(static_cast<std::uint64_t>(o.seed) * 1000 + mesh.world().rank());
  at::Tensor x = torch::randn({tokens, h}) * 0.1;
  const std::int64_t forced = tokens * o.skew / 100;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t first = t < forced ? 0 : (t % e);
    x[t][first] += 4.0;
    x[t][(first + 1 + t % (e - 1 > 0 ? e - 1 : 1)) % e] += 2.0;  // the second choice
  }
  std::vector<at::Tensor> params = layer.expert_parameters();
  for (const at::Tensor& p : layer.dense_parameters()) params.push_back(p);
  chorus::train::MoeGradientReducers reducers(mesh, layer.expert_parameters(),
                                              layer.dense_parameters());
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(1e-6));
  chorus::Communicator ep = mesh.expert().comm;  // copies share the communicator
  const auto step = [&] {
    optimizer.zero_grad();
    reducers.begin_step();
    const chorus::train::MoeOutput out = layer.forward(x);
    (out.output.square().mean() + out.aux_loss).backward();
    reducers.finish_step();
    optimizer.step();
  };
  return measure(o, ep, step, [&] { return std::vector<MoeStats>{layer.last_stats()}; });
}

/// The MoE GPT trained on random byte tokens, every block an MoE block.
Result gpt_run(const Options& o, chorus::train::Mesh& mesh) {
  chorus::train::GptConfig config{.layers = o.layers,
                                  .hidden = o.hidden,
                                  .heads = o.heads,
                                  .vocab = 256,
                                  .sequence = o.seq,
                                  .seed = static_cast<std::uint64_t>(o.seed)};
  config.moe = {.experts = o.experts, .routing = routing(o, 0)};
  chorus::train::GptModel model(config, mesh.tp(), mesh.cp(), mesh.expert());
  torch::manual_seed(static_cast<std::uint64_t>(o.seed) * 1000 + mesh.world().rank());
  const at::Tensor tokens = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
  const at::Tensor targets = torch::randint(0, 256, {o.seq, o.batch}, torch::kLong);
  std::vector<at::Tensor> experts, dense;
  for (const auto& p : model.named_parameters())
    (p.name.find(".moe.experts.") != std::string::npos ? experts : dense).push_back(p.tensor);
  chorus::train::MoeGradientReducers reducers(mesh, experts, dense);
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1e-3));
  chorus::Communicator ep = mesh.expert().comm;  // copies share the communicator
  const auto step = [&] {
    optimizer.zero_grad();
    reducers.begin_step();
    model.loss(tokens, targets).backward();
    reducers.finish_step();
    optimizer.step();
  };
  return measure(o, ep, step, [&] {
    std::vector<MoeStats> out;
    for (const chorus::train::MoeLayer* l : model.moe_layers()) out.push_back(l->last_stats());
    return out;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    torch::set_num_threads(1);
    chorus::Communicator world = connect();
    chorus::train::MeshOptions mesh_options;
    mesh_options.degrees.dp = world.size();
    mesh_options.degrees.ep = static_cast<int>(o.ep);
    chorus::train::Mesh mesh(world, mesh_options);
    const bool skew = o.skew >= 0;
    const Result r = skew ? skew_run(o, mesh) : gpt_run(o, mesh);
    const double step_ms = slowest(world, median(r.step_ms));
    const double a2av_ms = slowest(world, median(r.a2av_ms));
    double drops[2] = {static_cast<double>(r.dropped), static_cast<double>(r.assignments)};
    world.all_reduce(drops, drops, 2, chorus::DataType::Float64, chorus::ReduceOp::Sum);
    if (world.rank() == 0) {
      const double tokens = static_cast<double>(o.seq * o.batch * world.size());
      std::cout << std::fixed << std::setprecision(3)
                << "moe_bench mode=" << (skew ? "skew" : "gpt") << " ep=" << o.ep
                << " dp=" << world.size() << " experts=" << o.experts << " top_k=" << o.top_k
                << " capacity=" << o.capacity << " skew=" << o.skew << " hidden=" << o.hidden
                << " tokens_per_rank=" << o.seq * o.batch
                << " tokens_per_s=" << tokens / (step_ms / 1000.0) << " step_ms_median=" << step_ms
                << " a2av_ms=" << a2av_ms << " a2av_share=" << a2av_ms / step_ms
                << " drop_rate=" << (drops[1] > 0 ? drops[0] / drops[1] : 0.0) << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "moe_bench: " << e.what() << "\n";
    return 1;
  }
}
