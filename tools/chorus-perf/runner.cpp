// The benchmark loop (see runner.hpp).
#include "runner.hpp"

#include <chorus/error.hpp>
#include <chrono>
#include <cstdint>

#include "check.hpp"

namespace chorus::perf {
namespace {

using Clock = std::chrono::steady_clock;

double max_over_ranks(Communicator& comm, double value) {
  double result = 0;
  comm.all_reduce(&value, &result, 1, DataType::Float64, ReduceOp::Max);
  return result;
}

std::size_t sum_over_ranks(Communicator& comm, std::size_t value) {
  std::uint64_t mine = value, total = 0;
  comm.all_reduce(&mine, &total, 1, DataType::Uint64, ReduceOp::Sum);
  return static_cast<std::size_t>(total);
}

Row make_row(const BenchInfo& info, const Case& c) {
  Row row;
  row.bytes = c.count * dtype_size(c.dtype);
  row.count = c.count;
  row.type = c.bench == Bench::Barrier ? "none" : std::string(to_string(c.dtype));
  row.op = info.reduces ? std::string(to_string(c.op)) : "none";
  row.root = info.rooted ? c.root : -1;
  return row;
}

void run_row(Communicator& comm, const BenchInfo& info, const Case& c, const Options& options,
             Report& report) {
  Row row = make_row(info, c);
  row.out_of_place = measure(comm, c, false, options);
  if (options.in_place && info.has_in_place) row.in_place = measure(comm, c, true, options);
  report.row(row, info.bench != Bench::Barrier);
}

void run_bench(Communicator& comm, const BenchInfo& info, const Options& options, Report& report) {
  report.bench_header(info);
  const int n = comm.size();
  if (info.bench == Bench::SendRecv && n < 2) {
    report.comment("sendrecv skipped: it needs at least 2 ranks");
    return;
  }
  if (info.bench == Bench::Barrier) {
    run_row(comm, info,
            make_case(info.bench, 0, DataType::Uint8, ReduceOp::Sum, -1, comm.rank(), n), options,
            report);
    return;
  }
  std::vector<ReduceOp> ops = info.reduces ? options.ops : std::vector<ReduceOp>{ReduceOp::Sum};
  for (DataType dtype : options.dtypes) {
    for (ReduceOp op : ops) {
      for (std::size_t bytes : message_sizes(options)) {
        Case c = make_case(info.bench, bytes, dtype, op, options.root, comm.rank(), n);
        run_row(comm, info, c, options, report);
      }
    }
  }
}

}  // namespace

Timing measure(Communicator& comm, const Case& c, bool in_place, const Options& options) {
  Buffers buffers = make_buffers(c, in_place, options.shared ? &comm : nullptr);
  fill_buffers(c, buffers);
  for (int i = 0; i < options.warmup; ++i) run_once(comm, c, buffers);
  comm.barrier();
  auto start = Clock::now();
  for (int i = 0; i < options.iters; ++i) run_once(comm, c, buffers);
  double local = std::chrono::duration<double>(Clock::now() - start).count() / options.iters;
  Timing timing;
  // Send/recv pairs run no collective algorithm (last_algorithm names the barrier).
  timing.algorithm = c.bench == Bench::SendRecv ? "p2p" : comm.last_algorithm();
  timing.seconds = max_over_ranks(comm, local);
  timing.algbw = timing.seconds > 0 ? algbw_bytes(c) / timing.seconds / 1e9 : 0;
  timing.busbw = timing.algbw * bus_factor(c.bench, c.nranks);
  if (options.check) {
    fill_buffers(c, buffers);
    run_once(comm, c, buffers);
    timing.wrong = sum_over_ranks(comm, count_wrong(c, buffers));
  }
  return timing;
}

void run_benchmarks(Communicator& comm, const Options& options, Report& report) {
  require_argument(options.root < comm.size(), "-r " + std::to_string(options.root) +
                                                   " is not a rank of this " +
                                                   std::to_string(comm.size()) + "-rank job");
  for (const std::string& name : options.collectives) {
    run_bench(comm, *find_bench(name), options, report);
  }
}

}  // namespace chorus::perf
