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

}  // namespace

ComputeProfile parse_compute_profile(std::istream& in, std::string_view source) {
  static const char* const kKeys[] = {
      "hidden",       "heads",  "seq", "micro_batch", "tp", "layer_forward_ms", "layer_backward_ms",
      "embedding_ms", "head_ms"};
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
    require_argument(static_cast<bool>(fields >> value) && !(fields >> rest),
                     where + ": expected '" + key + " <positive number>'");
    bool known = false;
    for (const char* name : kKeys) known = known || key == name;
    require_argument(known, where + ": unknown compute profile key '" + key + "'");
    values[key] = positive_number(where, key, value);
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
  return p;
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
  std::string out = "# compute profile (docs/planner.md): one GPT block's measured times\n";
  out += "hidden " + std::to_string(p.hidden) + "\nheads " + std::to_string(p.heads) + "\nseq " +
         std::to_string(p.seq) + "\nmicro_batch " + std::to_string(p.micro_batch) + "\ntp " +
         std::to_string(p.tp) + "\nlayer_forward_ms " + ms(p.layer_forward_ms) +
         "\nlayer_backward_ms " + ms(p.layer_backward_ms) + "\n";
  if (p.embedding_ms > 0) out += "embedding_ms " + ms(p.embedding_ms) + "\n";
  if (p.head_ms > 0) out += "head_ms " + ms(p.head_ms) + "\n";
  for (std::size_t i = 0; i < p.block_forward_ms.size(); ++i)
    out += "layer " + std::to_string(i) + " " + ms(p.block_forward_ms[i]) + " " +
           ms(p.block_backward_ms[i]) + "\n";
  return out;
}

}  // namespace chorus::plan
