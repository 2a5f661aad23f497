// The compute profile's text format (compute_profile.hpp).
#include "plan/compute_profile.hpp"

#include <chorus/error.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace chorus::plan {

double positive_number(const std::string& where, const std::string& key, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require_argument(used == text.size() && std::isfinite(value) && value > 0,
                   where + ": expected '" + key + " <positive number>', got '" + text + "'");
  return value;
}

namespace {

/// One "layer I F B" line, I the next block.
void read_layer(ComputeProfile& p, std::istringstream& fields, const std::string& where) {
  std::string index, forward, backward, rest;
  require_argument(static_cast<bool>(fields >> index >> forward >> backward) && !(fields >> rest),
                   where + ": expected 'layer <index> <forward ms> <backward ms>'");
  const std::string next = std::to_string(p.block_forward_ms.size());
  require_argument(index == next, where + ": layer " + index + " where layer " + next +
                                      " comes next (one line per block, in order)");
  p.block_forward_ms.push_back(positive_number(where, "layer " + index, forward));
  p.block_backward_ms.push_back(positive_number(where, "layer " + index, backward));
}

/// A positive whole number of `units` (samples, processes).
std::int64_t whole_number(const std::string& where, const std::string& key, const std::string& text,
                          const char* units) {
  const double value = positive_number(where, key, text);
  require_argument(value == std::floor(value) && value < 1e15,
                   where + ": " + key + " '" + text + "' is not a whole number of " + units);
  return static_cast<std::int64_t>(value);
}

std::int64_t micro_batch_size(const std::string& where, const std::string& key,
                              const std::string& text) {
  return whole_number(where, key, text, "samples");
}

/// One "at B F W E H" line: the times at another micro-batch size.
void read_size(ComputeProfile& p, std::istringstream& fields, const std::string& where) {
  std::string size, forward, backward, embedding, head, rest;
  require_argument(static_cast<bool>(fields >> size >> forward >> backward >> embedding >> head) &&
                       !(fields >> rest),
                   where +
                       ": expected 'at <micro-batch> <layer forward ms> <layer backward ms> "
                       "<embedding ms> <head ms>'");
  SizeTimes t;
  t.micro_batch = micro_batch_size(where, "at", size);
  const std::string key = "at " + size;
  t.layer_forward_ms = positive_number(where, key, forward);
  t.layer_backward_ms = positive_number(where, key, backward);
  t.embedding_ms = positive_number(where, key, embedding);
  t.head_ms = positive_number(where, key, head);
  for (const SizeTimes& other : p.more_sizes)
    require_argument(other.micro_batch != t.micro_batch,
                     where + ": micro-batch " + size + " has a second 'at' line");
  p.more_sizes.push_back(t);
}

/// One "recompute B S F" line.
void read_recompute(ComputeProfile& p, std::istringstream& fields, const std::string& where) {
  std::string size, selective, full, rest;
  require_argument(static_cast<bool>(fields >> size >> selective >> full) && !(fields >> rest),
                   where +
                       ": expected 'recompute <micro-batch> <selective backward ms> <full "
                       "backward ms>'");
  RecomputeTimes t;
  t.micro_batch = micro_batch_size(where, "recompute", size);
  t.selective_backward_ms = positive_number(where, "recompute " + size, selective);
  t.full_backward_ms = positive_number(where, "recompute " + size, full);
  for (const RecomputeTimes& other : p.recompute)
    require_argument(other.micro_batch != t.micro_batch,
                     where + ": micro-batch " + size + " has a second 'recompute' line");
  p.recompute.push_back(t);
}

/// The "at" lines' sizes against the main micro-batch, and what they need; the "recompute"
/// lines' sizes among the profile's.
void check_sizes(const ComputeProfile& p, std::string_view source) {
  require_argument(p.more_sizes.empty() || (p.embedding_ms > 0 && p.head_ms > 0),
                   std::string(source) +
                       ": 'at' lines need the embedding_ms and head_ms lines (the times at "
                       "micro_batch " +
                       std::to_string(p.micro_batch) + ")");
  for (const SizeTimes& t : p.more_sizes)
    require_argument(t.micro_batch != p.micro_batch,
                     std::string(source) + ": micro-batch " + std::to_string(t.micro_batch) +
                         " has an 'at' line and is the micro_batch line's too");
  const std::vector<SizeTimes> sizes = p.sizes();
  for (const RecomputeTimes& r : p.recompute) {
    bool profiled = false;
    for (const SizeTimes& t : sizes) profiled = profiled || t.micro_batch == r.micro_batch;
    require_argument(profiled, std::string(source) + ": 'recompute " +
                                   std::to_string(r.micro_batch) +
                                   "' is not a profiled micro-batch (micro_batch or an 'at' line)");
  }
}

/// The concurrency line's value as an int; at most kMaxConcurrency.
int concurrency(double value, std::string_view source) {
  constexpr double kMaxConcurrency = 1 << 20;
  require_argument(value <= kMaxConcurrency,
                   std::string(source) + ": concurrency " +
                       std::to_string(static_cast<long long>(value)) + " is above " +
                       std::to_string(static_cast<int>(kMaxConcurrency)) + " processes");
  return static_cast<int>(value);
}

}  // namespace

ComputeProfile parse_compute_profile(std::istream& in, std::string_view source) {
  static const char* const kKeys[] = {"hidden",
                                      "heads",
                                      "seq",
                                      "micro_batch",
                                      "tp",
                                      "layer_forward_ms",
                                      "layer_backward_ms",
                                      "embedding_ms",
                                      "head_ms",
                                      "vocab",
                                      "optimizer_ns_per_parameter",
                                      "concurrency"};
  ComputeProfile p;
  std::map<std::string, double> values;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = std::string(source) + ":" + std::to_string(number);
    std::istringstream fields(line.substr(0, line.find('#')));
    std::string key, value, rest;
    if (!(fields >> key)) continue;
    if (key == "layer") {
      read_layer(p, fields, where);
      continue;
    }
    if (key == "at") {
      read_size(p, fields, where);
      continue;
    }
    if (key == "recompute") {
      read_recompute(p, fields, where);
      continue;
    }
    require_argument(static_cast<bool>(fields >> value) && !(fields >> rest),
                     where + ": expected '" + key + " <positive number>'");
    bool known = false;
    for (const char* name : kKeys) known = known || key == name;
    require_argument(known, where + ": unknown compute profile key '" + key + "'");
    if (key == "micro_batch" || key == "concurrency") {
      values[key] =
          static_cast<double>(key == "micro_batch" ? micro_batch_size(where, key, value)
                                                   : whole_number(where, key, value, "processes"));
    } else {
      values[key] = positive_number(where, key, value);
    }
  }
  for (const char* name :
       {"hidden", "heads", "seq", "micro_batch", "layer_forward_ms", "layer_backward_ms"}) {
    require_argument(values.count(name) == 1,
                     std::string(source) + ": the compute profile has no '" + name + "' line");
  }
  p.hidden = static_cast<std::int64_t>(values["hidden"]);
  p.heads = static_cast<std::int64_t>(values["heads"]);
  p.seq = static_cast<std::int64_t>(values["seq"]);
  p.micro_batch = static_cast<std::int64_t>(values["micro_batch"]);
  p.tp = values.count("tp") ? static_cast<int>(values["tp"]) : 1;
  p.layer_forward_ms = values["layer_forward_ms"];
  p.layer_backward_ms = values["layer_backward_ms"];
  p.embedding_ms = values.count("embedding_ms") ? values["embedding_ms"] : 0;
  p.head_ms = values.count("head_ms") ? values["head_ms"] : 0;
  p.vocab = values.count("vocab") ? static_cast<std::int64_t>(values["vocab"]) : 0;
  p.optimizer_ns_per_parameter =
      values.count("optimizer_ns_per_parameter") ? values["optimizer_ns_per_parameter"] : 0;
  p.concurrency = values.count("concurrency") ? concurrency(values["concurrency"], source) : 1;
  check_sizes(p, source);
  return p;
}

std::vector<SizeTimes> ComputeProfile::sizes() const {
  std::vector<SizeTimes> out = {
      {micro_batch, layer_forward_ms, layer_backward_ms, embedding_ms, head_ms}};
  out.insert(out.end(), more_sizes.begin(), more_sizes.end());
  return out;
}

ComputeProfile load_compute_profile_file(const std::string& path) {
  std::ifstream in(path);
  require_argument(in.good(), "compute profile '" + path + "' cannot be read");
  return parse_compute_profile(in, path);
}

std::string format_compute_profile(const ComputeProfile& p) {
  const auto ms = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6f", v);
    return std::string(text);
  };
  std::string out =
      "# compute profile (docs/planner.md): one GPT block's measured times\n"
      "# concurrency: the processes computing at once (each its own model) while timed\n";
  if (!p.more_sizes.empty())
    out += "# at <micro-batch> <layer forward> <layer backward> <embedding> <head> (ms)\n";
  if (!p.recompute.empty())
    out += "# recompute <micro-batch> <layer backward: selective> <full> (ms)\n";
  out += "hidden " + std::to_string(p.hidden) + "\nheads " + std::to_string(p.heads) + "\nseq " +
         std::to_string(p.seq) + "\nmicro_batch " + std::to_string(p.micro_batch) + "\ntp " +
         std::to_string(p.tp) + "\nconcurrency " + std::to_string(p.concurrency) +
         "\nlayer_forward_ms " + ms(p.layer_forward_ms) + "\nlayer_backward_ms " +
         ms(p.layer_backward_ms) + "\n";
  if (p.embedding_ms > 0) out += "embedding_ms " + ms(p.embedding_ms) + "\n";
  if (p.head_ms > 0) out += "head_ms " + ms(p.head_ms) + "\n";
  if (p.vocab > 0) out += "vocab " + std::to_string(p.vocab) + "\n";
  if (p.optimizer_ns_per_parameter > 0)
    out += "optimizer_ns_per_parameter " + ms(p.optimizer_ns_per_parameter) + "\n";
  for (const SizeTimes& t : p.more_sizes)
    out += "at " + std::to_string(t.micro_batch) + " " + ms(t.layer_forward_ms) + " " +
           ms(t.layer_backward_ms) + " " + ms(t.embedding_ms) + " " + ms(t.head_ms) + "\n";
  for (const RecomputeTimes& t : p.recompute)
    out += "recompute " + std::to_string(t.micro_batch) + " " + ms(t.selective_backward_ms) + " " +
           ms(t.full_backward_ms) + "\n";
  for (std::size_t i = 0; i < p.block_forward_ms.size(); ++i)
    out += "layer " + std::to_string(i) + " " + ms(p.block_forward_ms[i]) + " " +
           ms(p.block_backward_ms[i]) + "\n";
  return out;
}

std::vector<double*> measured_times(ComputeProfile& p) {
  std::vector<double*> out = {&p.layer_forward_ms, &p.layer_backward_ms, &p.embedding_ms,
                              &p.head_ms, &p.optimizer_ns_per_parameter};
  for (std::size_t i = 0; i < p.block_forward_ms.size(); ++i)
    out.insert(out.end(), {&p.block_forward_ms[i], &p.block_backward_ms[i]});
  for (SizeTimes& t : p.more_sizes)
    out.insert(out.end(), {&t.layer_forward_ms, &t.layer_backward_ms, &t.embedding_ms, &t.head_ms});
  for (RecomputeTimes& t : p.recompute)
    out.insert(out.end(), {&t.selective_backward_ms, &t.full_backward_ms});
  return out;
}

}  // namespace chorus::plan
