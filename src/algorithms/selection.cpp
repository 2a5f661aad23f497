// Algorithm selection: the cost-model choice, CHORUS_ALGO parsing, and the
// fallback when a named algorithm declines a case. Everything here is a pure
// function of its arguments, so every rank of a call picks the same algorithm.
#include "algorithms/selection.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace chorus::algorithms {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

bool any_collective_has(std::string_view name) {
  for (const Algorithm* algorithm : all_algorithms()) {
    if (algorithm->name == name) return true;
  }
  return false;
}

std::string names_of(Collective collective) {
  std::string names;
  for (const Algorithm* algorithm : all_algorithms()) {
    if (algorithm->collective != collective) continue;
    names += (names.empty() ? "" : ", ") + std::string(algorithm->name);
  }
  return names.empty() ? "none" : names;
}

AlgorithmOverride parse_entry(std::string_view entry) {
  std::string quoted = "CHORUS_ALGO entry '" + std::string(entry) + "'";
  auto equals = entry.find('=');
  AlgorithmOverride parsed;
  parsed.name = trim(equals == std::string_view::npos ? entry : entry.substr(equals + 1));
  require_argument(!parsed.name.empty(), quoted + " names no algorithm");
  if (equals == std::string_view::npos) {
    require_argument(any_collective_has(parsed.name),
                     quoted + " matches no algorithm of any collective");
    return parsed;
  }
  Collective collective;
  require_argument(parse_collective(trim(entry.substr(0, equals)), &collective),
                   quoted + " names an unknown collective");
  require_argument(find_algorithm(collective, parsed.name) != nullptr,
                   quoted + ": " + std::string(to_string(collective)) + " has no algorithm '" +
                       parsed.name + "' (it has: " + names_of(collective) + ")");
  parsed.collective = collective;
  return parsed;
}

/// "95.3 us", "1.25 ms", or "infinite" (the model rules the algorithm out, or does not know it).
std::string modelled_time_text(double seconds) {
  if (!std::isfinite(seconds)) return "infinite";
  char text[32];
  if (seconds < 1e-3) {
    std::snprintf(text, sizeof text, "%.3g us", seconds * 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  }
  return text;
}

}  // namespace

std::vector<AlgorithmOverride> parse_algorithm_override(std::string_view spec) {
  std::vector<AlgorithmOverride> overrides;
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view entry = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (!entry.empty()) overrides.push_back(parse_entry(entry));
  }
  return overrides;
}

std::string_view requested_algorithm(const std::vector<AlgorithmOverride>& overrides,
                                     Collective collective) {
  std::string_view specific, bare;
  for (const AlgorithmOverride& entry : overrides) {
    if (entry.collective == collective) specific = entry.name;
    if (!entry.collective && find_algorithm(collective, entry.name)) bare = entry.name;
  }
  return specific.empty() ? bare : specific;
}

bool algorithm_accepts(const Algorithm& algorithm, const Call& args, int nranks, Needs provided) {
  return (algorithm.needs & ~provided) == 0 &&
         (algorithm.accepts == nullptr || algorithm.accepts(args, nranks));
}

std::size_t selection_bytes(const Call& args) { return args.count * dtype_size(args.dtype); }

SelectionContext single_host_context(int nranks) {
  SelectionContext context;
  context.machine.nranks = nranks;
  return context;
}

Selection evaluate(const Algorithm& algorithm, const Call& args, const SelectionContext& context) {
  CostInput input{args.collective, selection_bytes(args), args.dtype,
                  args.op,         context.machine,       context.parameters};
  Selection choice{&algorithm, algorithm.chunk ? algorithm.chunk(input) : 0};
  input.chunk_bytes = choice.chunk_bytes;
  choice.modelled_seconds = algorithm.cost(input);
  return choice;
}

Selection default_selection(const Call& args, Needs provided, const SelectionContext& context) {
  if (args.collective == Collective::Send || args.collective == Collective::Recv) {
    throw Error(Status::InvalidUsage, std::string(to_string(args.collective)) +
                                          " has no algorithms; the communicator moves it itself");
  }
  const int nranks = context.machine.nranks;
  Selection best;
  for (const Algorithm* algorithm : all_algorithms()) {
    if (algorithm->collective != args.collective ||
        !algorithm_accepts(*algorithm, args, nranks, provided)) {
      continue;
    }
    Selection candidate = evaluate(*algorithm, args, context);
    if (!best.algorithm || candidate.modelled_seconds < best.modelled_seconds) best = candidate;
  }
  if (best.algorithm) return best;
  throw Error(Status::InternalError, "no registered algorithm accepts this " +
                                         std::string(to_string(args.collective)) + " on " +
                                         std::to_string(nranks) + " ranks");
}

Selection select(const Call& args, Needs provided, const SelectionContext& context,
                 const std::vector<AlgorithmOverride>& overrides) {
  std::string_view name = requested_algorithm(overrides, args.collective);
  if (!name.empty()) {
    const Algorithm* requested = find_algorithm(args.collective, name);
    if (requested && algorithm_accepts(*requested, args, context.machine.nranks, provided)) {
      return evaluate(*requested, args, context);
    }
  }
  return default_selection(args, provided, context);
}

const Selection& SelectionCache::select(const Call& args, Needs provided,
                                        const SelectionContext& context,
                                        const std::vector<AlgorithmOverride>& overrides) {
  const std::size_t bytes = selection_bytes(args);
  // Fibonacci hashing: the top 6 bits of the product index the 64 entries.
  static_assert(kEntries == 64);
  Entry& entry =
      entries_[(bytes * 0x9E3779B97F4A7C15ull + static_cast<std::size_t>(args.collective)) >> 58];
  if (!entry.used || entry.collective != args.collective || entry.bytes != bytes ||
      entry.dtype != args.dtype || entry.op != args.op || entry.provided != provided) {
    entry.choice = algorithms::select(args, provided, context, overrides);  // throws: untouched
    entry.used = true;
    entry.collective = args.collective;
    entry.bytes = bytes;
    entry.dtype = args.dtype;
    entry.op = args.op;
    entry.provided = provided;
  }
  return entry.choice;
}

std::string explain_selection(const Call& args, Needs provided, const SelectionContext& context,
                              const std::vector<AlgorithmOverride>& overrides) {
  std::vector<Selection> modelled;
  std::string declined;
  for (const Algorithm* algorithm : all_algorithms()) {
    if (algorithm->collective != args.collective) continue;
    if (algorithm_accepts(*algorithm, args, context.machine.nranks, provided)) {
      modelled.push_back(evaluate(*algorithm, args, context));
    } else {
      declined += (declined.empty() ? "" : ", ") + std::string(algorithm->name);
    }
  }
  std::stable_sort(modelled.begin(), modelled.end(), [](const Selection& a, const Selection& b) {
    return a.modelled_seconds < b.modelled_seconds;
  });
  std::string text;
  const std::string_view requested = requested_algorithm(overrides, args.collective);
  if (!requested.empty()) text = "CHORUS_ALGO asks for " + std::string(requested) + "; ";
  text += "modelled:";
  for (const Selection& s : modelled) {
    text += (&s == modelled.data() ? " " : ", ") + std::string(s.algorithm->name) + " " +
            modelled_time_text(s.modelled_seconds);
  }
  if (!declined.empty()) text += "; declined by " + declined;
  return text;
}

const Algorithm& select_algorithm(const Call& args, int nranks, Needs provided,
                                  std::string_view override_spec) {
  return *select(args, provided, single_host_context(nranks),
                 parse_algorithm_override(override_spec))
              .algorithm;
}

}  // namespace chorus::algorithms
