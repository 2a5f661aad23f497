// chorus-faults: random-kill fault injection (issue 4 item 3).
//   chorus-faults [--trials N] [--seed S] [--min-ranks A] [--max-ranks B]
//                 [--transports shm,tcp] [--max-delay-ms D] [--chorusrun PATH] [--worker PATH]
// Each trial runs `chorusrun -n N fault_worker` (N uniform in [A, B], the transport drawn
// from the list), SIGKILLs a random rank 0..D ms after every rank started its random
// collectives, and checks what follows (fault_trial.hpp). Prints one line per trial and
// the detection times (kill -> a survivor's call failed): min, median, p95, max, overall
// and per transport. Exit 0 when every trial passed.
#include "fault_trial.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace chorus::faults;

struct Options {
  int trials = 100;
  std::uint64_t seed = std::random_device{}();
  int min_ranks = 2;
  int max_ranks = 5;
  std::vector<std::string> transports = {"shm", "tcp"};
  int max_delay_ms = 400;
  Programs programs{CHORUS_FAULTS_CHORUSRUN, CHORUS_FAULTS_WORKER};
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "chorus-faults: %s\nusage: chorus-faults [--trials N] [--seed S] [--min-ranks A] "
               "[--max-ranks B] [--transports shm,tcp] [--max-delay-ms D] [--chorusrun PATH] "
               "[--worker PATH]\n",
               why.c_str());
  std::exit(2);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item != "shm" && item != "tcp") usage("unknown transport " + item);
    items.push_back(item);
  }
  if (items.empty()) usage("--transports needs shm and/or tcp");
  return items;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--trials")
      o.trials = std::stoi(value);
    else if (flag == "--seed")
      o.seed = std::stoull(value);
    else if (flag == "--min-ranks")
      o.min_ranks = std::stoi(value);
    else if (flag == "--max-ranks")
      o.max_ranks = std::stoi(value);
    else if (flag == "--transports")
      o.transports = split_list(value);
    else if (flag == "--max-delay-ms")
      o.max_delay_ms = std::stoi(value);
    else if (flag == "--chorusrun")
      o.programs.chorusrun = value;
    else if (flag == "--worker")
      o.programs.worker = value;
    else
      usage("unknown option " + flag);
  }
  if (o.min_ranks < 2 || o.max_ranks < o.min_ranks) usage("need 2 <= --min-ranks <= --max-ranks");
  return o;
}

/// "n 42: min 1.2 median 3.4 p95 5.6 max 7.8 ms" (nearest-rank percentiles).
std::string statistics(std::vector<double> ms) {
  if (ms.empty()) return "n 0";
  std::sort(ms.begin(), ms.end());
  auto rank = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<std::size_t>(p * ms.size()))];
  };
  char line[160];
  std::snprintf(line, sizeof line, "n %zu: min %.1f median %.1f p95 %.1f max %.1f ms", ms.size(),
                ms.front(), rank(0.5), rank(0.95), ms.back());
  return line;
}

std::string join(const std::vector<double>& ms) {
  std::string text;
  char item[32];
  for (double v : ms) {
    std::snprintf(item, sizeof item, "%s%.1f", text.empty() ? "" : " ", v);
    text += item;
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::printf("chorus-faults: %d trials, seed %llu\n", o.trials,
              static_cast<unsigned long long>(o.seed));
  std::mt19937_64 rng(o.seed);
  std::map<std::string, std::vector<double>> by_transport;
  std::vector<double> all;
  int failed = 0;
  for (int t = 0; t < o.trials; ++t) {
    TrialPlan plan;
    plan.ranks = o.min_ranks + static_cast<int>(rng() % (o.max_ranks - o.min_ranks + 1));
    plan.transport = o.transports[rng() % o.transports.size()];
    plan.victim = static_cast<int>(rng() % plan.ranks);
    plan.delay_ms = static_cast<int>(rng() % (o.max_delay_ms + 1));
    plan.seed = rng();
    TrialResult r = run_trial(o.programs, plan);
    std::printf(
        "trial %d: %d ranks %s, rank %d killed %d ms in; chorusrun exit %d; detected (ms) [%s] "
        "%s\n",
        t, plan.ranks, plan.transport.c_str(), plan.victim, plan.delay_ms, r.chorusrun_exit,
        join(r.detection_ms).c_str(), r.problems.empty() ? "ok" : "FAILED");
    for (const std::string& problem : r.problems) std::printf("    %s\n", problem.c_str());
    if (!r.sentences.empty()) std::printf("    e.g. %.200s\n", r.sentences.front().c_str());
    std::fflush(stdout);
    failed += !r.problems.empty();
    all.insert(all.end(), r.detection_ms.begin(), r.detection_ms.end());
    auto& mine = by_transport[plan.transport];
    mine.insert(mine.end(), r.detection_ms.begin(), r.detection_ms.end());
  }
  std::printf("detection time, all survivors: %s\n", statistics(all).c_str());
  for (const auto& [transport, ms] : by_transport) {
    std::printf("detection time, %s: %s\n", transport.c_str(), statistics(ms).c_str());
  }
  std::printf("%d of %d trials passed\n", o.trials - failed, o.trials);
  return failed == 0 ? 0 : 1;
}
