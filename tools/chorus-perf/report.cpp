// Table formatting (see report.hpp). Column widths follow nccl-tests.
#include "report.hpp"

#include <cstdio>
#include <cstdlib>

namespace chorus::perf {
namespace {

std::string format(const char* pattern, auto... values) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, values...);
  return buffer;
}

std::string env_text(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : "(unset)";
}

std::string time_text(double seconds) {
  double us = seconds * 1e6;
  if (us < 1e4) return format("%8.2f", us);
  if (us < 1e5) return format("%8.1f", us);
  return format("%8.0f", us);
}

std::string section_text(const Timing& t) {
  std::string wrong = t.wrong ? std::to_string(*t.wrong) : "N/A";
  return "  " + time_text(t.seconds) +
         format("  %7.2f  %7.2f  %6s", t.algbw, t.busbw, wrong.c_str());
}

constexpr const char* kSectionHeads = "  %8s  %7s  %7s  %6s";

}  // namespace

void Report::print(const std::string& line) {
  if (printing_) std::printf("%s\n", line.c_str());
}

void Report::comment(const std::string& text) { print("# " + text); }

void Report::job_header(int nranks, const std::vector<std::string>& rank_lines) {
  print(
      format("# chorus-perf: nranks %d  minBytes %zu  maxBytes %zu  step: %s  warmup iters: %d"
             "  iters: %d  check: %d  in-place: %d",
             nranks, options_.min_bytes, options_.max_bytes,
             options_.step_bytes > 0 ? format("%zu(bytes)", options_.step_bytes).c_str()
                                     : format("%g(factor)", options_.step_factor).c_str(),
             options_.warmup, options_.iters, options_.check ? 1 : 0, options_.in_place ? 1 : 0));
  print("# CHORUS_ALGO=" + env_text("CHORUS_ALGO") +
        "  CHORUS_TRANSPORT=" + env_text("CHORUS_TRANSPORT"));
  print("#");
  for (const std::string& line : rank_lines) print("#  " + line);
}

void Report::bench_header(const BenchInfo& info) {
  print("#");
  std::string factor = info.bench == Bench::Barrier
                           ? "no bandwidth"
                           : "busbw = algbw * " + std::string(info.bus_factor_text);
  print("# Collective: " + std::string(info.name) + "  (" + factor + ")");
  std::string heads =
      format("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  std::string units = format("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  std::string titles = format("#%51s", "");
  int sections = options_.in_place ? 2 : 1;
  for (int s = 0; s < sections; ++s) {
    heads += format(kSectionHeads, "time", "algbw", "busbw", "#wrong");
    units += format(kSectionHeads, "(us)", "(GB/s)", "(GB/s)", "");
    titles += format("  %34s", s == 0 ? "out-of-place" : "in-place");
  }
  print(titles);
  print(heads + "  algorithm");
  print(units);
}

void Report::row(const Row& row, bool counts_for_average) {
  std::string line = format("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type.c_str(),
                            row.op.c_str(), row.root);
  std::string algorithm = row.out_of_place.algorithm;
  std::vector<const Timing*> timings{&row.out_of_place};
  if (row.in_place) timings.push_back(&*row.in_place);
  for (const Timing* t : timings) {
    line += section_text(*t);
    total_wrong_ += t->wrong.value_or(0);
    if (counts_for_average) {
      busbw_sum_ += t->busbw;
      ++busbw_rows_;
    }
  }
  if (options_.in_place && !row.in_place) line += format(kSectionHeads, "-", "-", "-", "-");
  if (row.in_place && row.in_place->algorithm != algorithm)
    algorithm += "," + row.in_place->algorithm;
  print(line + "  " + (algorithm.empty() ? "-" : algorithm));
}

void Report::summary() {
  print("#");
  print(
      format("# Out of bounds values : %zu %s", total_wrong_, total_wrong_ == 0 ? "OK" : "FAILED"));
  double average = busbw_rows_ > 0 ? busbw_sum_ / static_cast<double>(busbw_rows_) : 0;
  print(format("# Avg bus bandwidth    : %g ", average));
  print("#");
  if (printing_) std::fflush(stdout);
}

}  // namespace chorus::perf
