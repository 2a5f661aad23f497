// chorus-perf's pieces without a communicator: option parsing, case shapes,
// and the closed-form check against an in-process reference of every
// collective (built from DESIGN.md's definitions and the library's reduce kernels).
#include <gtest/gtest.h>

#include <chorus/error.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "collectives.hpp"
#include "core/reduce.hpp"
#include "options.hpp"

namespace chorus::perf {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "chorus-perf");
  return parse_options(static_cast<int>(args.size()), args.data());
}

TEST(PerfOptions, SizesAndSteps) {
  EXPECT_EQ(parse_size("-b", "64K"), 65536u);
  EXPECT_EQ(parse_size("-b", "3M"), 3u << 20);
  EXPECT_EQ(parse_size("-b", "1G"), 1u << 30);
  EXPECT_EQ(parse_size("-b", "17"), 17u);
  EXPECT_THROW(parse_size("-b", "1T"), Error);
  EXPECT_THROW(parse_size("-b", "K"), Error);
  EXPECT_THROW(parse_size("-b", "-3"), Error);
  EXPECT_EQ(message_sizes(parse({"-b", "8", "-e", "64K", "-f", "8"})),
            (std::vector<std::size_t>{8, 64, 512, 4096, 32768}));
  EXPECT_EQ(message_sizes(parse({"-b", "0", "-e", "4", "-f", "2"})),
            (std::vector<std::size_t>{0, 1, 2, 4}));
  EXPECT_EQ(message_sizes(parse({"-b", "10", "-e", "30", "-i", "10"})),
            (std::vector<std::size_t>{10, 20, 30}));
}

std::string refusal(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// More sizes than one run takes is refused with the count and what to change, not cut short.
TEST(PerfOptions, TooManySizesAreRefused) {
  EXPECT_EQ(refusal({"-b", "4", "-e", "1M", "-i", "4"}),
            "-b 4 -e 1048576 -i 4 gives 262144 sizes (chorus-perf runs at most 10000): raise -i "
            "to at least 105 or narrow -b/-e");
  EXPECT_EQ(message_sizes(parse({"-b", "4", "-e", "1M", "-i", "105"})).size(), 9987u);
  EXPECT_EQ(message_sizes(parse({"-b", "1", "-e", "10000", "-i", "1"})).size(), 10000u);
  EXPECT_EQ(refusal({"-b", "1", "-e", "10001", "-i", "1"}).substr(0, 32),
            "-b 1 -e 10001 -i 1 gives 10001 s");
  EXPECT_EQ(refusal({"-b", "0", "-e", "1G", "-f", "1.0001"}),
            "-b 0 -e 1073741824 -f 1.0001 gives more than 10000 sizes (chorus-perf runs at most "
            "10000): raise -f or narrow -b/-e");
  Options direct;  // built without parse_options: message_sizes refuses it the same way
  direct.min_bytes = 4;
  direct.max_bytes = 1 << 20;
  direct.step_bytes = 4;
  EXPECT_THROW(message_sizes(direct), Error);
}

TEST(PerfOptions, Values) {
  Options o = parse({"-t", "all", "-d", "all", "-o", "max", "-r", "2", "-z", "-c", "0", "-a",
                     "ring", "-n5", "-w", "0", "--shared"});
  EXPECT_EQ(o.collectives.size(), all_benches().size());
  EXPECT_TRUE(o.shared);
  EXPECT_FALSE(parse({"-n5"}).shared);
  EXPECT_EQ(o.dtypes.size(), static_cast<std::size_t>(kNumDataTypes));
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::Max});
  EXPECT_EQ(o.root, 2);
  EXPECT_TRUE(o.in_place);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.algorithm, "ring");
  EXPECT_EQ(o.iters, 5);
  EXPECT_EQ(o.warmup, 0);
  for (auto bad : std::vector<std::vector<const char*>>{{"-t", "nope"},
                                                        {"-d", "int7"},
                                                        {"-o", "xor"},
                                                        {"-n", "0"},
                                                        {"-c", "2"},
                                                        {"-f", "1"},
                                                        {"-b", "2K", "-e", "1K"},
                                                        {"-q", "1"},
                                                        {"-b"},
                                                        {"stray"}}) {
    EXPECT_THROW(parse(bad), Error) << testing::PrintToString(bad);
  }
}

TEST(PerfCollectives, ShapesAndFactors) {
  Case c = make_case(Bench::AllGather, 100, DataType::Float32, ReduceOp::Sum, 0, 1, 3);
  EXPECT_EQ(c.block, 8u);  // 25 elements -> 8 per rank
  EXPECT_EQ(c.count, 24u);
  c = make_case(Bench::AllReduce, 100, DataType::Float64, ReduceOp::Sum, 0, 1, 3);
  EXPECT_EQ(c.count, 12u);
  EXPECT_DOUBLE_EQ(bus_factor(Bench::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Bench::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Bench::Broadcast, 4), 1.0);
  c = make_case(Bench::AllToAllV, 64, DataType::Uint8, ReduceOp::Sum, 0, 0, 2);  // block 32
  EXPECT_DOUBLE_EQ(algbw_bytes(c), (32 + 16 + 16 + 32) / 2.0);
}

// The reference: what every rank's output must be, computed from all ranks'
// inputs with memcpy (data movement) or the library's reduce kernels.
class Reference {
 public:
  Reference(const std::vector<Case>& cases, std::vector<Buffers>& buffers)
      : cases_(cases), buffers_(buffers), elem_(dtype_size(cases[0].dtype)) {
    for (const Buffers& b : buffers) inputs_.emplace_back(b.send, b.send + b.send_elems * elem_);
  }

  void run() {
    for (std::size_t r = 0; r < cases_.size(); ++r) run_rank(cases_[r], buffers_[r]);
  }

 private:
  const std::byte* in(int q, std::size_t k) const { return inputs_[q].data() + k * elem_; }
  void copy(std::byte* dst, std::size_t k, const std::byte* src, std::size_t n) const {
    if (n > 0) std::memcpy(dst + k * elem_, src, n * elem_);
  }

  // out[0..n) = reduction over ranks of input elements [offset, offset + n).
  void reduce_into_output(const Case& c, std::byte* out, std::size_t offset, std::size_t n) const {
    if (n == 0) return;
    DataType acc_type = accumulation_type(c.dtype, c.op);
    ReduceOp op = c.op == ReduceOp::Avg ? ReduceOp::Sum : c.op;
    std::vector<std::byte> acc(n * 8), next(n * 8);
    convert(in(0, offset), c.dtype, acc.data(), acc_type, n);
    for (int q = 1; q < c.nranks; ++q) {
      convert(in(q, offset), c.dtype, next.data(), acc_type, n);
      reduce_inplace(acc.data(), next.data(), n, acc_type, op);
    }
    if (c.op == ReduceOp::Avg) finalize_average(acc.data(), n, acc_type, c.nranks);
    convert(acc.data(), acc_type, out, c.dtype, n);
  }

  void run_rank(const Case& c, Buffers& b) const {
    const int r = c.rank, n = c.nranks;
    const std::size_t blk = c.block;
    switch (c.bench) {
      case Bench::AllReduce:
        reduce_into_output(c, b.recv, 0, c.count);
        break;
      case Bench::Reduce:
        if (r == c.root) reduce_into_output(c, b.recv, 0, c.count);
        break;
      case Bench::ReduceScatter:
        reduce_into_output(c, b.recv, r * blk, blk);
        break;
      case Bench::Broadcast:
        copy(b.recv, 0, in(c.root, 0), c.count);
        break;
      case Bench::AllGather:
      case Bench::Gather:
        if (c.bench == Bench::Gather && r != c.root) break;
        for (int q = 0; q < n; ++q) copy(b.recv, q * blk, in(q, 0), blk);
        break;
      case Bench::Scatter:
        copy(b.recv, 0, in(c.root, r * blk), blk);
        break;
      case Bench::AllToAll:
        for (int q = 0; q < n; ++q) copy(b.recv, q * blk, in(q, r * blk), blk);
        break;
      case Bench::AllToAllV:
        for (int q = 0; q < n; ++q) {
          copy(b.recv, b.recv_displs[q], in(q, r * blk), alltoallv_count(c, q, r));
        }
        break;
      case Bench::SendRecv:
        copy(b.recv, 0, in((r + n - 1) % n, 0), c.count);
        break;
      case Bench::Barrier:
        break;
    }
  }

  const std::vector<Case>& cases_;
  std::vector<Buffers>& buffers_;
  std::size_t elem_;
  std::vector<std::vector<std::byte>> inputs_;
};

bool rank_has_output(const Case& c, const Buffers& b) {
  if (b.recv_elems == 0 || c.bench == Bench::Barrier) return false;
  return (c.bench != Bench::Reduce && c.bench != Bench::Gather) || c.rank == c.root;
}

// Fills, runs the reference, expects no wrong element; then corrupts one
// output element (its most significant byte) and expects exactly one.
void check_case(Bench bench, DataType dtype, ReduceOp op, int nranks, std::size_t bytes,
                bool in_place) {
  SCOPED_TRACE(testing::Message() << "bench=" << static_cast<int>(bench) << " dtype="
                                  << to_string(dtype) << " op=" << to_string(op) << " n=" << nranks
                                  << " bytes=" << bytes << " in_place=" << in_place);
  std::vector<Case> cases;
  std::vector<Buffers> buffers;
  for (int r = 0; r < nranks; ++r) {
    cases.push_back(make_case(bench, bytes, dtype, op, nranks - 1, r, nranks));
    buffers.push_back(make_buffers(cases.back(), in_place));
    fill_buffers(cases.back(), buffers.back());
  }
  Reference(cases, buffers).run();
  for (int r = 0; r < nranks; ++r) {
    ASSERT_EQ(count_wrong(cases[r], buffers[r]), 0u) << "rank " << r;
    if (!rank_has_output(cases[r], buffers[r])) continue;
    std::size_t elem = dtype_size(dtype);
    buffers[r].recv[elem - 1] ^= std::byte{0x55};
    EXPECT_EQ(count_wrong(cases[r], buffers[r]), 1u) << "rank " << r;
  }
}

TEST(PerfCheck, ClosedFormsMatchTheReference) {
  for (const BenchInfo& info : all_benches()) {
    for (int dtype = 0; dtype < kNumDataTypes; ++dtype) {
      for (int op = 0; op < (info.reduces ? kNumReduceOps : 1); ++op) {
        for (int nranks : {1, 2, 3, 5, 8}) {
          for (std::size_t bytes : {0, 8, 200, 1000}) {
            for (bool in_place : {false, true}) {
              check_case(info.bench, static_cast<DataType>(dtype), static_cast<ReduceOp>(op),
                         nranks, bytes, in_place);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chorus::perf
