// chorus-perf: the nccl-tests style benchmark of Chorus collectives. Run it
// under chorusrun; every rank joins through Communicator::init_from_env().
#include <unistd.h>

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "tune.hpp"

namespace chorus::perf {
namespace {

constexpr int kUsageExit = 2;
constexpr std::size_t kHostBytes = 64;

// Before init only the launcher's rank variable tells who should speak for the job: RANK, else
// Slurm's, Open MPI's or PMI's (init_from_env's order); nullptr when none is set.
const char* rank_by_env() {
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return value;
  }
  return nullptr;
}

bool is_first_rank_by_env() {
  const char* rank = rank_by_env();
  return rank == nullptr || std::string(rank) == "0";
}

// "Rank  0 Pid  1234 on host" for every rank, gathered to all (rank 0 prints).
std::vector<std::string> rank_lines(Communicator& comm) {
  std::vector<char> mine(kHostBytes + sizeof(std::int64_t), 0);
  gethostname(mine.data(), kHostBytes - 1);
  std::int64_t pid = getpid();
  std::memcpy(mine.data() + kHostBytes, &pid, sizeof pid);
  std::vector<char> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine.data(), all.data(), mine.size(), DataType::Uint8);
  std::vector<std::string> lines;
  for (int r = 0; r < comm.size(); ++r) {
    const char* entry = all.data() + mine.size() * static_cast<std::size_t>(r);
    std::memcpy(&pid, entry + kHostBytes, sizeof pid);
    char line[160];
    std::snprintf(line, sizeof line, "Rank %2d Pid %7lld on %s", r, static_cast<long long>(pid),
                  entry);
    lines.emplace_back(line);
  }
  return lines;
}

int run(const Options& options) {
  Communicator comm = Communicator::init_from_env();
  Report report(options, comm.rank() == 0);
  try {
    if (options.tune_file) {
      run_tune(comm, *options.tune_file);
      comm.barrier();
      return 0;
    }
    report.job_header(comm.size(), rank_lines(comm));
    run_benchmarks(comm, options, report);
  } catch (const Error& error) {
    if (error.status() != Status::InvalidArgument) throw;
    // Every rank finds the same bad argument; rank 0 says so before anyone
    // exits (the launcher stops the job at the first exit).
    if (comm.rank() == 0) std::fprintf(stderr, "chorus-perf: %s\n", error.what());
    comm.barrier();
    return kUsageExit;
  }
  report.summary();
  comm.barrier();
  return report.total_wrong() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace chorus::perf

int main(int argc, char** argv) {
  using namespace chorus::perf;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured, even in a pipe
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const chorus::Error& error) {
    // Every rank finds the same error; rank 0 says so and exits with kUsageExit. The others
    // exit quietly with 0: a failing exit of theirs could make the launcher stop rank 0
    // before it has said why.
    if (!is_first_rank_by_env()) return 0;
    std::fprintf(stderr, "chorus-perf: %s\nTry 'chorus-perf -h'.\n", error.what());
    return kUsageExit;
  }
  if (options.help) {
    if (is_first_rank_by_env()) std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (options.tune_file) setenv("CHORUS_ALGO", "allreduce=recursive_doubling", 1);  // tune.hpp
  if (options.algorithm) setenv("CHORUS_ALGO", options.algorithm->c_str(), 1);
  try {
    return run(options);
  } catch (const chorus::Error& error) {
    const char* rank = rank_by_env();
    std::fprintf(stderr, "chorus-perf: rank %s: %s: %s\n", rank ? rank : "?",
                 std::string(chorus::to_string(error.status())).c_str(), error.what());
    return 1;
  }
}
