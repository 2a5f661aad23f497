// gloo_collectives: the Gloo peer of chorus-perf, for bench/compare.py.
//
// Same meaning of size, time, algbw and busbw as tools/chorus-perf (nccl-tests):
//   SIZE is the buffer nccl-tests reports: for allgather, gather and alltoall the
//   receive buffer, for reducescatter and scatter the send buffer; the element
//   count is rounded down to a multiple of the rank count there.
//   time  = mean over the timed iterations, max over ranks (after warm-up and a barrier).
//   algbw = size / time.  busbw = algbw * factor: allreduce 2(n-1)/n; allgather,
//   reducescatter, gather, scatter, alltoall (n-1)/n; broadcast, reduce 1.
// Data: fp32, op sum, root 0, out of place, except reducescatter: Gloo has only
// the in-place ReduceScatterHalvingDoubling algorithm class. Sizes whose count
// is 0 (fewer elements than ranks) are skipped: Gloo rejects empty buffers.
//
// Transport: gloo::transport::tcp on 127.0.0.1; rendezvous through a FileStore
// in the directory given by -s (empty, shared by the N processes of one job).
//
// usage: gloo_collectives -R RANK -N SIZE -s STOREDIR [-t NAME[,NAME...]|all]
//                         [-b BYTES] [-e BYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]
// Output (rank 0): '#' comment lines; one data line per size:
//   collective  size(B)  count  time(us)  algbw(GB/s)  busbw(GB/s)
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Context = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);
constexpr std::chrono::milliseconds kTimeout(60000);

const char* const kNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                              "reducescatter", "alltoall",  "gather", "scatter"};
constexpr int kNumBenches = 8;
// allgather and after: count is a multiple of the rank count, block = count / n.
bool is_blocked(int b) { return b >= 3; }

double bus_factor(int b, int n) {
  if (b == 0) return 2.0 * (n - 1) / n;
  if (b == 1 || b == 2) return 1.0;
  return static_cast<double>(n - 1) / n;
}

struct Options {
  int rank = -1, size = 0;
  std::string store;
  bool selected[kNumBenches] = {};
  long long min_bytes = 8, max_bytes = 64ll << 20;
  double factor = 8;
  int iters = 20, warmup = 5;
};

// "64M" = 64 * 2^20 bytes (K/M/G suffixes as in chorus-perf).
long long parse_bytes(const std::string& text) {
  size_t used = 0;
  long long value = std::stoll(text, &used);
  std::string suffix = text.substr(used);
  int shift = suffix == "K" || suffix == "k"   ? 10
              : suffix == "M" || suffix == "m" ? 20
              : suffix == "G" || suffix == "g" ? 30
                                               : 0;
  if (shift == 0 && !suffix.empty()) throw std::invalid_argument("bad size '" + text + "'");
  return value << shift;
}

void select(Options& o, const std::string& list) {
  std::stringstream words(list);
  std::string name;
  while (std::getline(words, name, ',')) {
    bool found = false;
    for (int b = 0; b < kNumBenches; ++b) {
      if (name == "all" || name == kNames[b]) o.selected[b] = found = true;
    }
    if (!found) throw std::invalid_argument("unknown collective '" + name + "' in -t");
  }
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool any = false;
  if (argc % 2 == 0) throw std::invalid_argument("every option needs a value");
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], v = argv[i + 1];
    if (flag == "-R") {
      o.rank = std::stoi(v);
    } else if (flag == "-N") {
      o.size = std::stoi(v);
    } else if (flag == "-s") {
      o.store = v;
    } else if (flag == "-t") {
      select(o, v);
      any = true;
    } else if (flag == "-b") {
      o.min_bytes = parse_bytes(v);
    } else if (flag == "-e") {
      o.max_bytes = parse_bytes(v);
    } else if (flag == "-f") {
      o.factor = std::stod(v);
    } else if (flag == "-n") {
      o.iters = std::stoi(v);
    } else if (flag == "-w") {
      o.warmup = std::stoi(v);
    } else {
      throw std::invalid_argument("unknown option '" + flag + "'");
    }
  }
  if (!any) o.selected[0] = true;
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size || o.store.empty() || o.factor <= 1 ||
      o.iters < 1 || o.warmup < 0 || o.min_bytes < 0 || o.min_bytes > o.max_bytes) {
    throw std::invalid_argument("need -R in [0,N), -N >= 1, -s DIR and sane -b/-e/-f/-n/-w");
  }
  return o;
}

// Buffers of one size: send and recv hold count elements each, enough for every
// collective's send and receive side; scatter's root reads n blocks of send.
struct Case {
  int bench, rank, n;
  size_t count, block;
  std::vector<float> send, recv;
};

void run_once(const Context& ctx, Case& c) {
  float* send = c.send.data();
  float* recv = c.recv.data();
  auto sum = static_cast<ReduceFn>(&gloo::sum<float>);
  switch (c.bench) {
    case 0: {
      gloo::AllreduceOptions opts(ctx);
      opts.setInput(send, c.count);
      opts.setOutput(recv, c.count);
      opts.setReduceFunction(sum);
      gloo::allreduce(opts);
      break;
    }
    case 1: {
      gloo::BroadcastOptions opts(ctx);
      if (c.rank == 0) opts.setInput(send, c.count);
      opts.setOutput(recv, c.count);
      opts.setRoot(0);
      gloo::broadcast(opts);
      break;
    }
    case 2: {
      gloo::ReduceOptions opts(ctx);
      opts.setInput(send, c.count);
      opts.setOutput(recv, c.count);
      opts.setReduceFunction(sum);
      opts.setRoot(0);
      gloo::reduce(opts);
      break;
    }
    case 3: {
      gloo::AllgatherOptions opts(ctx);
      opts.setInput(send, c.block);
      opts.setOutput(recv, c.count);
      gloo::allgather(opts);
      break;
    }
    case 4: {
      std::vector<int> recv_elems(c.n, static_cast<int>(c.block));
      gloo::ReduceScatterHalvingDoubling<float> algorithm(ctx, {send}, static_cast<int>(c.count),
                                                          recv_elems);
      algorithm.run();
      break;
    }
    case 5: {
      gloo::AlltoallOptions opts(ctx);
      opts.setInput(send, c.count);
      opts.setOutput(recv, c.count);
      gloo::alltoall(opts);
      break;
    }
    case 6: {
      gloo::GatherOptions opts(ctx);
      opts.setInput(send, c.block);
      if (c.rank == 0) opts.setOutput(recv, c.count);
      opts.setRoot(0);
      gloo::gather(opts);
      break;
    }
    case 7: {
      gloo::ScatterOptions opts(ctx);
      if (c.rank == 0) {
        std::vector<float*> blocks;
        for (int p = 0; p < c.n; ++p) blocks.push_back(send + static_cast<size_t>(p) * c.block);
        opts.setInputs(blocks, c.block);
      }
      opts.setOutput(recv, c.block);
      opts.setRoot(0);
      gloo::scatter(opts);
      break;
    }
  }
}

void barrier(const Context& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

double max_over_ranks(const Context& ctx, double value) {
  double result = 0;
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(&value, 1);
  opts.setOutput(&result, 1);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
  gloo::allreduce(opts);
  return result;
}

// Seconds per iteration, max over ranks.
double measure(const Context& ctx, Case& c, const Options& o) {
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < c.count; ++i) c.send[i] = c.recv[i] = static_cast<float>(i % 17);
  for (int i = 0; i < o.warmup; ++i) run_once(ctx, c);
  barrier(ctx);
  auto start = Clock::now();
  for (int i = 0; i < o.iters; ++i) run_once(ctx, c);
  double local = std::chrono::duration<double>(Clock::now() - start).count() / o.iters;
  return max_over_ranks(ctx, local);
}

// The size sequence of chorus-perf: ceil(size * factor), at least size + 1.
long long next_size(long long size, double factor) {
  auto next = static_cast<long long>(std::ceil(static_cast<double>(size) * factor));
  return next > size ? next : size + 1;
}

void run_bench(const Context& ctx, int bench, const Options& o) {
  const int n = o.size;
  for (long long bytes = o.min_bytes; bytes <= o.max_bytes; bytes = next_size(bytes, o.factor)) {
    size_t elements = static_cast<size_t>(bytes) / sizeof(float);
    size_t block = is_blocked(bench) ? elements / n : elements;
    size_t count = is_blocked(bench) ? block * n : elements;
    if (count == 0) continue;
    Case c{bench, o.rank, n, count, block, std::vector<float>(count), std::vector<float>(count)};
    double seconds = measure(ctx, c, o);
    double size = static_cast<double>(count * sizeof(float));
    double algbw = seconds > 0 ? size / seconds / 1e9 : 0;
    if (o.rank == 0) {
      std::printf("%-14s %12zu %12zu %12.2f %9.3f %9.3f\n", kNames[bench], count * sizeof(float),
                  count, seconds * 1e6, algbw, algbw * bus_factor(bench, n));
      std::fflush(stdout);
    }
  }
}

Context connect(const Options& o) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(o.store);
  gloo::rendezvous::PrefixStore store("gloo_collectives", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
  context->setTimeout(kTimeout);
  context->connectFullMesh(store, device);
  return context;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gloo_collectives: %s\n", error.what());
    return 2;
  }
  try {
    Context ctx = connect(o);
    if (o.rank == 0) {
      std::printf("# gloo_collectives: nranks %d iters %d warmup %d library Gloo %d.%d.%d tcp\n",
                  o.size, o.iters, o.warmup, GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                  GLOO_VERSION_PATCH);
      std::printf("# collective   size(B) count time(us) algbw(GB/s) busbw(GB/s)\n");
    }
    for (int b = 0; b < kNumBenches; ++b) {
      if (o.selected[b]) run_bench(ctx, b, o);
    }
    barrier(ctx);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gloo_collectives: rank %d: %s\n", o.rank, error.what());
    return 1;
  }
  return 0;
}
