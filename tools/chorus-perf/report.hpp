// The nccl-tests style table chorus-perf prints (only rank 0 prints; every
// rank keeps the totals so that all of them agree on the exit status).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "options.hpp"

namespace chorus::perf {

/// One timing of one form (out-of-place or in-place) of a case.
struct Timing {
  double seconds = 0;                ///< mean per iteration, max over ranks
  double algbw = 0;                  ///< GB/s
  double busbw = 0;                  ///< GB/s
  std::optional<std::size_t> wrong;  ///< wrong elements over all ranks; empty without -c 1
  std::string algorithm;             ///< Communicator::last_algorithm() on rank 0
};

struct Row {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::string type;  ///< dtype name, "none" for barrier
  std::string op;    ///< reduce op name, "none" when the collective has none
  int root = -1;     ///< -1 when the collective has none
  Timing out_of_place;
  std::optional<Timing>
      in_place;  ///< empty without -z, or when the collective has no in-place form
};

class Report {
 public:
  Report(const Options& options, bool printing) : options_(options), printing_(printing) {}

  /// The job's parameters and one line per rank ("#  Rank  0 Pid 123 on host").
  void job_header(int nranks, const std::vector<std::string>& rank_lines);
  /// "# Collective: allreduce (busbw = algbw * 2(n-1)/n)" and the column heads.
  void bench_header(const BenchInfo& info);
  void row(const Row& row, bool counts_for_average);
  void comment(const std::string& text);
  /// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
  void summary();
  std::size_t total_wrong() const { return total_wrong_; }

 private:
  void print(const std::string& line);

  const Options& options_;
  bool printing_;
  std::size_t total_wrong_ = 0;
  double busbw_sum_ = 0;
  std::size_t busbw_rows_ = 0;
};

}  // namespace chorus::perf
