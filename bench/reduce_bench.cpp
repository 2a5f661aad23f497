// Reduction kernels at memory speed: GB/s of every supported kernel
// (generic, avx2, avx512) beside memcpy's, for fp32, fp16, bf16 and int32 sums
// at 4 KiB (L1), 256 KiB (L2), 8 MiB (LLC-ish) and 64 MiB (DRAM) per buffer.
//
// Bytes counted per iteration: a + b + dst for a reduction (3 x size), source +
// destination for memcpy (2 x size), so both columns are memory traffic.
//
//   cmake -S . -B build -DCHORUS_BUILD_BENCH=ON && cmake --build build --target reduce_bench
//   build/bench/reduce_bench [--benchmark_filter=fp32]
#include "core/reduce.hpp"
#include "core/reduce_kernels.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus {
namespace {

constexpr std::size_t kSizes[] = {4u << 10, 256u << 10, 8u << 20, 64u << 20};
constexpr DataType kDtypes[] = {DataType::Float32, DataType::Float16, DataType::Bfloat16,
                                DataType::Int32};

// Buffers filled with a repeating byte pattern that is a normal, finite value
// in every benchmarked dtype (0x3c: fp32 ~0.011, fp16 ~1.06, bf16 ~0.011).
struct Buffers {
  explicit Buffers(std::size_t bytes) : a(bytes, 0x3c), b(bytes, 0x3c), dst(bytes, 0) {}
  std::vector<std::uint8_t> a, b, dst;
};

void bench_memcpy(benchmark::State& state, std::size_t bytes) {
  Buffers buf(bytes);
  for (auto _ : state) {
    std::memcpy(buf.dst.data(), buf.a.data(), bytes);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
}

void bench_reduce(benchmark::State& state, ReduceKernel kernel, DataType dtype, std::size_t bytes) {
  Buffers buf(bytes);
  const std::size_t count = bytes / dtype_size(dtype);
  for (auto _ : state) {
    kernel(buf.dst.data(), buf.a.data(), buf.b.data(), count, dtype, ReduceOp::Sum);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * bytes));
}

std::string size_name(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB"
                             : std::to_string(bytes >> 10) + "KiB";
}

void register_all() {
  for (std::size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + size_name(bytes)).c_str(), bench_memcpy, bytes);
    for (DataType dtype : kDtypes) {
      for (ReduceIsa isa : kReduceIsas) {
        if (!reduce_isa_supported(isa)) continue;
        std::string name = "sum_" + std::string(to_string(dtype)) + "/" +
                           std::string(to_string(isa)) + "/" + size_name(bytes);
        benchmark::RegisterBenchmark(name.c_str(), bench_reduce, reduce_kernel(isa), dtype, bytes);
      }
    }
  }
  // The public entry point, with whatever kernel dispatch chose (CHORUS_REDUCE_ISA).
  benchmark::RegisterBenchmark(
      ("reduce_into_" + std::string(to_string(active_reduce_isa())) + "/fp32/8MiB").c_str(),
      [](benchmark::State& state) {
        bench_reduce(state, reduce_into, DataType::Float32, 8u << 20);
      });
}

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  chorus::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
