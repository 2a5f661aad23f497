// What chorus-plan prints: the command line of a layout, the explanation of the winner, the
// text table and the JSON (planner.hpp).
#include "plan/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace chorus::plan {
namespace {

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string ms(double seconds) { return fixed(seconds * 1e3, 3) + " ms"; }

std::string gib(double bytes) { return fixed(bytes / (1024.0 * 1024 * 1024), 3) + " GiB"; }

/// The named terms of a prediction that make up its step time.
std::vector<std::pair<std::string, double>> terms(const Prediction& p) {
  std::vector<std::pair<std::string, double>> out = {{"compute", p.compute_seconds},
                                                     {"bubble", p.bubble_seconds},
                                                     {"optimizer", p.optimizer_seconds}};
  for (const GroupTime& g : p.groups) out.push_back({g.group + " exposed", g.exposed});
  return out;
}

double term(const Prediction& p, const std::string& name) {
  for (const auto& [n, v] : terms(p))
    if (n == name) return v;
  return 0;
}

/// `text` as a JSON string's contents: quotes and backslashes escaped, control bytes dropped.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

void append_json_group(std::ostringstream& out, const GroupTime& g, bool first) {
  out << (first ? "" : ", ") << "\"" << g.group << "\": {\"exposed_s\": " << g.exposed
      << ", \"overlapped_s\": " << g.overlapped << "}";
}

}  // namespace

std::string command_line(const PlanRequest& request, const Layout& l) {
  const ModelConfig& m = request.model;
  std::ostringstream out;
  if (request.hosts == 1) {
    out << "chorusrun -n " << request.ranks_per_host;
  } else {
    out << "chorusrun --nnodes " << request.hosts << " --nproc-per-node " << request.ranks_per_host
        << " --node-rank <host> --master-addr <host 0> "
        << "--master-port 29500";
  }
  out << " chorus-train --model gpt --layers " << m.layers << " --hidden " << m.hidden
      << " --heads " << m.heads << " --seq-len " << m.seq << " --batch "
      << l.micro_batch * l.micro_batches << " --micro-batches " << l.micro_batches;
  if (l.tp > 1) out << " --tp " << l.tp;
  if (l.cp > 1) out << " --cp " << l.cp;
  if (l.pp > 1) out << " --pp " << l.pp << " --schedule " << to_string(l.schedule);
  if (l.schedule == Schedule::Interleaved) out << " --virtual-stages " << l.virtual_stages;
  if (m.moe()) {
    out << " --moe-experts " << m.experts << " --moe-top-k " << m.top_k;
    if (l.ep > 1) out << " --ep " << l.ep;
  }
  if (l.sequence_parallel) out << " --sequence-parallel";
  if (l.zero > 0) out << " --zero " << l.zero;
  if (l.recompute != Recompute::None) out << " --recompute " << to_string(l.recompute);
  return out.str();
}

std::string explain(const Prediction& best, const Prediction& runner_up) {
  const double gap = runner_up.step_seconds - best.step_seconds;
  std::ostringstream out;
  out << "best:      " << best.layout.describe() << "\nrunner-up: " << runner_up.layout.describe()
      << "\nthe best is " << ms(gap) << " faster (" << fixed(100 * gap / runner_up.step_seconds, 1)
      << "% of the runner-up's " << ms(runner_up.step_seconds) << "):";
  std::vector<std::pair<std::string, double>> differences;
  for (const auto& [name, value] : terms(runner_up))
    differences.push_back({name, value - term(best, name)});
  std::stable_sort(differences.begin(), differences.end(), [](const auto& a, const auto& b) {
    return std::fabs(a.second) > std::fabs(b.second);
  });
  for (const auto& [name, saved] : differences) {
    if (std::fabs(saved) < 1e-12) continue;
    out << "\n  " << name << ": " << ms(term(best, name)) << " against "
        << ms(term(runner_up, name)) << " (" << (saved >= 0 ? "saves " : "costs ")
        << ms(std::fabs(saved)) << ")";
  }
  if (gap == 0) out << "\n  equal step times: the smaller memory per rank ranks first";
  out << "\n  memory per rank: " << gib(best.memory.total()) << " against "
      << gib(runner_up.memory.total());
  return out.str();
}

std::string to_text(const PlanRequest& request, const PlanResult& result, std::size_t limit) {
  std::ostringstream out;
  const std::size_t shown =
      limit == 0 ? result.feasible.size() : std::min(limit, result.feasible.size());
  out << "# chorus-plan: " << request.world() << " ranks (" << request.hosts << " host(s) x "
      << request.ranks_per_host << "), machine " << request.machine.name << ", "
      << result.feasible.size() << " feasible of " << result.candidates << " layouts\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const Prediction& p = result.feasible[i];
    out << "\n"
        << i + 1 << ". " << p.layout.describe() << "\n   step " << ms(p.step_seconds)
        << ": compute " << ms(p.compute_seconds) << ", bubble " << ms(p.bubble_seconds);
    if (p.optimizer_seconds > 0) out << ", optimizer " << ms(p.optimizer_seconds);
    for (const GroupTime& g : p.groups) {
      if (g.exposed + g.overlapped <= 0) continue;
      out << ", " << g.group << " " << ms(g.exposed) << " exposed";
      if (g.overlapped > 0) out << " + " << ms(g.overlapped) << " overlapped";
    }
    const MemoryUse& mem = p.memory;
    out << "\n   memory per rank " << gib(mem.total()) << ": parameters " << gib(mem.parameters)
        << ", gradients " << gib(mem.gradients) << ", optimizer " << gib(mem.optimizer)
        << ", activations " << gib(mem.activations);
    if (mem.boundaries > 0) out << ", pipeline boundaries " << gib(mem.boundaries);
    out << "\n   " << command_line(request, p.layout) << "\n";
  }
  if (shown < result.feasible.size()) {
    out << "\n(" << result.feasible.size() - shown
        << " more feasible layouts; --top 0 prints every one)\n";
  }
  return out.str();
}

std::string to_json(const PlanRequest& request, const PlanResult& result, std::size_t limit) {
  std::ostringstream out;
  out.precision(9);
  const std::size_t shown =
      limit == 0 ? result.feasible.size() : std::min(limit, result.feasible.size());
  out << "{\"world\": " << request.world() << ", \"hosts\": " << request.hosts
      << ", \"ranks_per_host\": " << request.ranks_per_host << ", \"machine\": \""
      << escaped(request.machine.name) << "\", \"candidates\": " << result.candidates
      << ", \"feasible\": " << result.feasible.size() << ", \"infeasible\": \""
      << escaped(result.infeasible) << "\", \"warning\": \"" << escaped(result.warning)
      << "\", \"layouts\": [";
  for (std::size_t i = 0; i < shown; ++i) {
    const Prediction& p = result.feasible[i];
    const Layout& l = p.layout;
    out << (i ? ",\n  " : "\n  ") << "{\"tp\": " << l.tp << ", \"pp\": " << l.pp
        << ", \"cp\": " << l.cp << ", \"ep\": " << l.ep << ", \"dp\": " << l.dp
        << ", \"sequence_parallel\": " << (l.sequence_parallel ? "true" : "false")
        << ", \"zero\": " << l.zero << ", \"recompute\": \"" << to_string(l.recompute)
        << "\", \"schedule\": \"" << to_string(l.schedule)
        << "\", \"virtual_stages\": " << l.virtual_stages
        << ", \"micro_batches\": " << l.micro_batches << ", \"micro_batch\": " << l.micro_batch
        << ", \"step_s\": " << p.step_seconds << ", \"compute_s\": " << p.compute_seconds
        << ", \"bubble_s\": " << p.bubble_seconds << ", \"optimizer_s\": " << p.optimizer_seconds
        << ", \"groups\": {";
    for (std::size_t g = 0; g < p.groups.size(); ++g) append_json_group(out, p.groups[g], g == 0);
    out << "}, \"memory_bytes\": {\"parameters\": " << p.memory.parameters
        << ", \"gradients\": " << p.memory.gradients << ", \"optimizer\": " << p.memory.optimizer
        << ", \"activations\": " << p.memory.activations
        << ", \"boundaries\": " << p.memory.boundaries << ", \"total\": " << p.memory.total()
        << "}, \"command\": \"" << escaped(command_line(request, l)) << "\"}";
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace chorus::plan
