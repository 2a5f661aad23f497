// What the training benchmarks (gpt_bench, moe_bench, zero_bench) share: their flags, joining the
// job and the median.
#pragma once

#include <chorus/communicator.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace chorus::bench {

/// A benchmark's command line: flags without a value, flags with a word for a value, and
/// flags with a non-negative integer. A word's handler takes the text and returns an error
/// sentence, empty when it accepted the text.
struct Flags {
  std::vector<std::pair<std::string, bool*>> switches;
  std::vector<std::pair<std::string, std::function<std::string(const std::string&)>>> words;
  std::vector<std::pair<std::string, std::int64_t*>> numbers;
};

/// Reads argv[1..argc) into `flags`; an unknown flag, a missing value or a value that is not
/// a non-negative integer goes to `usage` (which does not return) as one sentence.
inline void parse_flags(int argc, char** argv, const Flags& flags,
                        void (*usage)(const std::string& problem)) {
  const auto named = [](const auto& list, const std::string& flag) {
    return std::find_if(list.begin(), list.end(), [&](const auto& f) { return f.first == flag; });
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (const auto s = named(flags.switches, flag); s != flags.switches.end()) {
      *s->second = true;
      continue;
    }
    const auto word = named(flags.words, flag);
    const auto number = named(flags.numbers, flag);
    if (word == flags.words.end() && number == flags.numbers.end()) usage("unknown option " + flag);
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string text = argv[++i];
    if (word != flags.words.end()) {
      if (const std::string problem = word->second(text); !problem.empty()) usage(problem);
      continue;
    }
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 0) usage(flag + " takes a number, not " + text);
    *number->second = value;
  }
}

/// The communicator of a chorusrun job (RANK set), else a job of this process alone.
inline Communicator connect() {
  if (std::getenv("RANK") != nullptr) return Communicator::init_from_env();
  InitOptions single;
  single.store_address = "127.0.0.1:0";
  return Communicator::init(single);
}

/// The median of `v` (not empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace chorus::bench
