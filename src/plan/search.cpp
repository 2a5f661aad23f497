// The search space of a plan and the plan itself (planner.hpp).
#include "plan/planner.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

namespace chorus::plan {
namespace {

std::vector<int> divisors(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t i = 1; i <= n; ++i)
    if (n % i == 0) out.push_back(static_cast<int>(i));
  return out;
}

/// Counts why layouts were refused, with one example each, for the sentence when none is
/// left.
struct Refusals {
  std::map<std::string, std::string> example;  // rule -> first example
  void add(const std::string& rule, const std::string& instance) {
    example.emplace(rule, instance);
  }
  std::string sentence(int world) const {
    std::string text = "no layout splits the world of " + std::to_string(world) + " ranks:";
    for (const auto& [rule, instance] : example) text += " " + rule + " (" + instance + ");";
    text.back() = '.';
    return text;
  }
};

/// The mesh degrees (tp, cp, pp, dp) and the expert degree the model and world allow.
std::vector<Layout> meshes(const PlanRequest& r, Refusals& refusals) {
  const ModelConfig& m = r.model;
  const int world = r.world();
  std::vector<Layout> out;
  for (int tp : divisors(world)) {
    if (m.heads % tp != 0) {
      refusals.add("tp must divide the " + std::to_string(m.heads) + " heads",
                   "tp " + std::to_string(tp));
      continue;
    }
    for (int cp : divisors(world / tp)) {
      if (m.heads % (static_cast<std::int64_t>(tp) * cp) != 0 || m.seq % cp != 0) {
        refusals.add("tp x cp must divide the heads and cp the sequence " + std::to_string(m.seq),
                     "tp " + std::to_string(tp) + " cp " + std::to_string(cp));
        continue;
      }
      for (int pp : divisors(world / tp / cp)) {
        const int dp = world / tp / cp / pp;
        if (pp > m.layers) {
          refusals.add("pp must be at most the " + std::to_string(m.layers) + " layers",
                       "pp " + std::to_string(pp));
          continue;
        }
        if (r.global_batch % dp != 0) {
          refusals.add("dp must divide the global batch " + std::to_string(r.global_batch),
                       "dp " + std::to_string(dp));
          continue;
        }
        for (int ep : m.moe() ? divisors(static_cast<std::int64_t>(dp) * cp) : std::vector{1}) {
          if (m.moe() && m.experts % ep != 0) continue;
          Layout l;
          l.tp = tp, l.cp = cp, l.pp = pp, l.dp = dp, l.ep = ep;
          out.push_back(l);
        }
      }
    }
  }
  return out;
}

/// (schedule, v) pairs for a mesh: no pipeline schedule at pp 1.
std::vector<std::pair<Schedule, int>> schedules(const ModelConfig& m, int pp) {
  if (pp == 1) return {{Schedule::OneFOneB, 1}};
  std::vector<std::pair<Schedule, int>> out = {{Schedule::OneFOneB, 1}, {Schedule::GPipe, 1}};
  for (int v = 2; v <= 4 && static_cast<std::int64_t>(pp) * v <= m.layers; ++v)
    out.push_back({Schedule::Interleaved, v});
  return out;
}

/// Micro-batch counts of a replica's batch: the given micro-batch size, or every divisor.
std::vector<std::int64_t> micro_batch_counts(const PlanRequest& r, std::int64_t replica_batch) {
  if (r.micro_batch > 0) {
    if (replica_batch % r.micro_batch != 0) return {};
    return {replica_batch / r.micro_batch};
  }
  std::vector<std::int64_t> out;
  for (int count : divisors(replica_batch)) out.push_back(count);
  return out;
}

void expand(const PlanRequest& r, const Layout& mesh, std::vector<Layout>& out) {
  const ModelConfig& m = r.model;
  const std::int64_t replica_batch = r.global_batch / mesh.dp;
  for (bool sp : {false, true}) {
    if (sp && (mesh.tp == 1 || m.seq % (static_cast<std::int64_t>(mesh.tp) * mesh.cp) != 0))
      continue;
    for (int zero = 0; zero <= 3; ++zero) {
      if (zero >= 2 && mesh.pp > 1) continue;  // ZeRO-2/3 shard what the pipeline accumulates
      for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        for (auto [schedule, v] : schedules(m, mesh.pp)) {
          for (std::int64_t count : micro_batch_counts(r, replica_batch)) {
            if (schedule == Schedule::Interleaved && count < mesh.pp) continue;
            Layout l = mesh;
            l.sequence_parallel = sp, l.zero = zero, l.recompute = rc;
            l.schedule = schedule, l.virtual_stages = v;
            l.micro_batches = count, l.micro_batch = replica_batch / count;
            out.push_back(l);
          }
        }
      }
    }
  }
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}

}  // namespace

std::vector<Layout> candidate_layouts(const PlanRequest& r, std::string* why) {
  const std::string problem = r.model.problem();
  require_argument(problem.empty(), "model: " + problem);
  require_argument(r.ranks_per_host >= 1 && r.hosts >= 1 && r.global_batch >= 1,
                   "world and batch must be positive (ranks per host " +
                       std::to_string(r.ranks_per_host) + ", hosts " + std::to_string(r.hosts) +
                       ", global batch " + std::to_string(r.global_batch) + ")");
  Refusals refusals;
  std::vector<Layout> out;
  for (const Layout& mesh : meshes(r, refusals)) expand(r, mesh, out);
  if (out.empty() && why) {
    *why = refusals.example.empty() ? "no micro-batch of " + std::to_string(r.micro_batch) +
                                          " samples divides any replica's batch (global batch " +
                                          std::to_string(r.global_batch) + ")"
                                    : refusals.sentence(r.world());
  }
  return out;
}

PlanResult plan(const PlanRequest& request) {
  require_argument(request.machine.times_compute(),
                   "no compute rate: give a machine profile with peak_tflops, a compute profile "
                   "or --tflops");
  PlanResult result;
  result.warning = compute_concurrency_warning(request);
  const std::vector<Layout> layouts = candidate_layouts(request, &result.infeasible);
  result.candidates = layouts.size();
  CollectiveCosts costs(request.machine.links);
  const double budget = request.budget();
  const Prediction* smallest = nullptr;
  std::vector<Prediction> all;
  all.reserve(layouts.size());
  for (const Layout& layout : layouts) all.push_back(predict(request, layout, costs));
  for (const Prediction& p : all) {
    if (!smallest || p.memory.total() < smallest->memory.total()) smallest = &p;
    if (budget <= 0 || p.memory.total() <= budget) result.feasible.push_back(p);
  }
  std::stable_sort(result.feasible.begin(), result.feasible.end(),
                   [](const Prediction& a, const Prediction& b) {
                     if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
                     return a.memory.total() < b.memory.total();  // ties: the smaller
                   });
  if (result.feasible.empty() && smallest) {
    const double need = smallest->memory.total();
    result.infeasible = "memory binds: the smallest layout (" + smallest->layout.describe() +
                        ") needs " + gib(need) + " per rank (model states " +
                        gib(smallest->memory.states()) + ", activations " +
                        gib(need - smallest->memory.states()) + "), the budget is " + gib(budget) +
                        ": " + gib(need - budget) + " short";
  }
  return result;
}

std::string compute_concurrency_warning(const PlanRequest& request) {
  const auto& measured = request.machine.measured;
  const int ranks = request.ranks_per_host;
  if (!measured || measured->concurrency == ranks) return "";
  const auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return "the compute profile was taken with " +
         count(measured->concurrency, "process", "processes") +
         " computing at once, the plan has " + count(ranks, "rank", "ranks") +
         " per host: ranks that share a host's cores compute slower together than alone, " +
         "so its compute times are likely too " + (measured->concurrency < ranks ? "low" : "high") +
         " (take it with `chorusrun -n " + std::to_string(ranks) +
         " chorus-train ... --write-compute-profile FILE`)";
}

}  // namespace chorus::plan
