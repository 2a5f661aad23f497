// The cma collectives (src/algorithms/{allreduce,broadcast,allgather,scatter,gather}/cma.cpp)
// through communicators, for what the algorithm sweep (tests/algorithms: each alone on
// threads, every count, dtype, op, root and in-place mode) does not reach: across forked
// processes, so that process_vm_readv really reads another address space (each collective,
// a small and an odd count of several MiB, in place and not, several roots), checked against
// reference.hpp with the algorithm that ran; that CHORUS_CMA=0, read when the communicator
// is created, keeps them off, and that peers whose memory cannot be read run shm_direct and
// report it; that a peer killed in the middle of calls fails every survivor with a
// RemoteError naming it within 2 s; that the cost model keeps shm_direct on this machine,
// where the kernel's copy is slow; and the transport's cross-memory reader on its own.
#include "algorithms/cost_model.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/selection.hpp"
#include "core/env.hpp"
#include "forked_ranks.hpp"
#include "reduction_checks.hpp"
#include "thread_ranks.hpp"
#include "transport/arena/cross_memory.hpp"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

namespace chorus::testing {
namespace {

constexpr std::size_t kLargeCount = 1'000'003;  // 2 to 8 MiB, odd: uneven slices, many chunks
const char* const kForceCma =
    "CHORUS_ALGO=allreduce=cma,broadcast=cma,allgather=cma,scatter=cma,gather=cma";

/// The algorithm that a call with data on several ranks must report: cma, or shm_direct
/// where the peers' memory cannot be read.
void expect_algorithm(Communicator& c, std::size_t count, const std::string& what,
                      const std::string& algorithm) {
  if (c.size() > 1 && count > 0)
    rank_check(c.last_algorithm() == algorithm, what + " ran " + c.last_algorithm());
}

void all_reduce_case(Communicator& c, DataType t, ReduceOp op, std::size_t count, bool in_place,
                     const std::string& algorithm = "cma") {
  auto send = make_input(c.rank(), count, t, op);
  std::vector<unsigned char> recv(send.size(), 0xAB);
  unsigned char* out = in_place ? send.data() : recv.data();
  const std::string what = case_label("allreduce", t, op, count, in_place);
  c.all_reduce(send.data(), out, count, t, op);
  expect_algorithm(c, count, what, algorithm);
  const std::string mismatch = first_reduction_mismatch(out, count, 0, c.size(), t, op);
  rank_check(mismatch.empty(), what + mismatch);
}

/// Element i of rank r's block for broadcast and all-gather.
double block_value(int r, std::size_t i, DataType t) {
  return static_cast<double>((static_cast<std::size_t>(r) * 31 + i * 7) %
                             (is_signed(t) ? 100 : 200));
}

std::vector<unsigned char> block_of_rank(int r, std::size_t count, DataType t) {
  std::vector<unsigned char> buf(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i)
    encode(block_value(r, i, t), t, buf.data() + i * dtype_size(t));
  return buf;
}

bool same_block(const unsigned char* got, int r, std::size_t count, DataType t) {
  if (count == 0) return true;  // got may be null: memcmp must not see it
  return std::memcmp(got, block_of_rank(r, count, t).data(), count * dtype_size(t)) == 0;
}

/// Every root on up to 3 ranks; beyond, the first, a middle and the last one.
std::vector<int> roots_of(int n) {
  if (n <= 3) {
    std::vector<int> all(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
    return all;
  }
  return {0, n / 2, n - 1};
}

void broadcast_and_gather_case(Communicator& c, DataType t, std::size_t count, bool in_place,
                               const std::string& algorithm = "cma") {
  const std::size_t bytes = count * dtype_size(t);
  const std::string what = case_label("broadcast/allgather", t, ReduceOp::Sum, count, in_place);
  for (int root : roots_of(c.size())) {
    auto mine = block_of_rank(c.rank(), count, t);
    std::vector<unsigned char> recv(bytes, 0xAB);
    const bool is_root = c.rank() == root;
    unsigned char* out = in_place && is_root ? mine.data() : recv.data();
    c.broadcast(is_root ? mine.data() : nullptr, out, count, t, root);
    expect_algorithm(c, count, what, algorithm);
    rank_check(same_block(out, root, count, t),
               what + ": wrong broadcast from " + std::to_string(root));
  }
  std::vector<unsigned char> all(bytes * c.size(), 0xAB);
  auto mine = block_of_rank(c.rank(), count, t);
  unsigned char* send = in_place ? all.data() + c.rank() * bytes : mine.data();
  if (in_place && count > 0) std::memcpy(send, mine.data(), bytes);
  c.all_gather(send, all.data(), count, t);
  expect_algorithm(c, count, what, algorithm);
  for (int r = 0; r < c.size(); ++r) {
    rank_check(same_block(all.data() + r * bytes, r, count, t),
               what + ": wrong block " + std::to_string(r));
  }
}

/// Scatter and gather from every root (roots_of): block j of the root's buffer is
/// block_of_rank(j). In place, the root's own block stays where it is: its receive
/// buffer is block root of its send buffer (scatter), its send buffer block root of
/// its receive buffer (gather).
void scatter_and_gather_case(Communicator& c, DataType t, std::size_t count, bool in_place,
                             const std::string& algorithm = "cma") {
  const std::size_t bytes = count * dtype_size(t);
  const int n = c.size();
  const std::string what = case_label("scatter/gather", t, ReduceOp::Sum, count, in_place);
  for (int root : roots_of(n)) {
    const bool is_root = c.rank() == root;
    std::vector<unsigned char> blocks(bytes * n, 0xAB);
    if (is_root) {
      for (int j = 0; j < n; ++j) {
        if (count > 0)
          std::memcpy(blocks.data() + j * bytes, block_of_rank(j, count, t).data(), bytes);
      }
    }
    std::vector<unsigned char> recv(bytes, 0xAB);
    unsigned char* out = in_place && is_root ? blocks.data() + root * bytes : recv.data();
    c.scatter(is_root ? blocks.data() : nullptr, out, count, t, root);
    expect_algorithm(c, count, what, algorithm);
    rank_check(same_block(out, c.rank(), count, t),
               what + ": wrong scatter block from root " + std::to_string(root));

    std::vector<unsigned char> all(is_root ? bytes * n : 0, 0xAB);
    auto mine = block_of_rank(c.rank(), count, t);
    const unsigned char* send = mine.data();
    if (in_place && is_root) {
      if (count > 0) std::memcpy(all.data() + root * bytes, mine.data(), bytes);
      send = all.data() + root * bytes;
    }
    c.gather(send, is_root ? all.data() : nullptr, count, t, root);
    expect_algorithm(c, count, what, algorithm);
    if (!is_root) continue;
    for (int r = 0; r < n; ++r) {
      rank_check(same_block(all.data() + r * bytes, r, count, t),
                 what + ": wrong gathered block " + std::to_string(r) + " at root " +
                     std::to_string(root));
    }
  }
}

/// Each collective on a small and a large count, in place and not, across processes.
void cross_process_calls(Communicator& c, SharedPage&) {
  for (bool in_place : {false, true}) {
    all_reduce_case(c, DataType::Float32, ReduceOp::Sum, 7, in_place);
    // Large, and an average of a half type (the communicator's lowering around cma).
    all_reduce_case(c, in_place ? DataType::Int64 : DataType::Float16,
                    in_place ? ReduceOp::Max : ReduceOp::Avg, kLargeCount, in_place);
    broadcast_and_gather_case(c, DataType::Int8, 1501, in_place);
    broadcast_and_gather_case(c, DataType::Int32, kLargeCount / (in_place ? 1 : 2), in_place);
    scatter_and_gather_case(c, DataType::Bfloat16, 7, in_place);
    scatter_and_gather_case(c, DataType::Float32, kLargeCount / 4 + (in_place ? 0 : 1), in_place);
  }
}

class CmaProcesses : public ::testing::TestWithParam<int> {};

TEST_P(CmaProcesses, EveryCollectiveReadsOtherProcesses) {
  ForkedRanks job{
      .n = GetParam(), .env = {kForceCma}, .limit = std::chrono::seconds(90), .before_join = {}};
  EXPECT_EQ((forked_ranks_failures(job, cross_process_calls)), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CmaProcesses, ::testing::Values(2, 3, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(CmaFallback, UnreadablePeersRunShmDirect) {
  ForkedRanks job{.n = 3,
                  .env = {kForceCma},
                  .limit = std::chrono::seconds(60),
                  .before_join = forbid_cross_memory_reads};
  auto statuses = run_forked_ranks(job, [](Communicator& c, SharedPage& page) {
    check_cross_memory_reads_refused(c, page);
    for (int repeat = 0; repeat < 3; ++repeat) {
      for (std::size_t count : {std::size_t{7}, kLargeCount / 4}) {
        all_reduce_case(c, DataType::Float32, ReduceOp::Sum, count, repeat == 1, "shm_direct");
        broadcast_and_gather_case(c, DataType::Int32, count, repeat == 2, "shm_direct");
        scatter_and_gather_case(c, DataType::Float32, count, repeat == 0, "shm_direct");
      }
    }
  });
  for (int status : statuses) EXPECT_TRUE(exited_cleanly(status)) << status;
}

// CHORUS_CMA is read when the communicator is created: 0 then keeps the cma
// algorithms off after the variable is gone.
TEST(CmaFallback, DisabledByEnvironmentAtCreation) {
  ::setenv("CHORUS_ALGO", "allreduce=cma", 1);
  ::setenv("CHORUS_CMA", "0", 1);
  ThreadJob job(3);
  ::unsetenv("CHORUS_CMA");
  ::unsetenv("CHORUS_ALGO");
  ASSERT_TRUE(job.ok());
  job.run([](Communicator& c) {
    std::vector<float> data(100000, 1.0f);
    c.all_reduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum);
    EXPECT_NE(c.last_algorithm(), "cma");
    EXPECT_EQ(data[99999], 3.0f);
  });
}

// ... and CHORUS_CMA=0 set after the creation changes nothing (forked ranks: cma on threads
// as ranks is invisible to ThreadSanitizer, whose builds run this file: each thread-rank maps
// the arena at its own address, so it cannot pair a flag's release with its acquire).
TEST(CmaFallback, EnvironmentAfterCreationChangesNothing) {
  ForkedRanks job{.n = 2, .env = {kForceCma}, .limit = std::chrono::seconds(60), .before_join = {}};
  auto statuses = run_forked_ranks(job, [](Communicator& c, SharedPage&) {
    ::setenv("CHORUS_CMA", "0", 1);
    all_reduce_case(c, DataType::Float32, ReduceOp::Sum, 1501, false);
    broadcast_and_gather_case(c, DataType::Int32, 7, true);
  });
  for (int status : statuses) EXPECT_TRUE(exited_cleanly(status)) << status;
}

TEST(CmaFallback, EnvironmentValueIsZeroOrOne) {
  ::setenv("CHORUS_CMA", "0", 1);
  EXPECT_FALSE(read_config().cma);
  ::setenv("CHORUS_CMA", "1", 1);
  EXPECT_TRUE(read_config().cma);
  ::setenv("CHORUS_CMA", "off", 1);
  try {
    read_config();
    ADD_FAILURE() << "CHORUS_CMA=off was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CHORUS_CMA"), std::string::npos) << e.what();
  }
  ::unsetenv("CHORUS_CMA");
  EXPECT_TRUE(read_config().cma);
}

// Rank 1 SIGKILLs itself at a random moment while all ranks loop over large cma
// all-reduces; the others must fail with RemoteError naming rank 1 within 2 s.
TEST(CmaFaults, KilledPeerIsNamedWithinTwoSeconds) {
  ForkedRanks job{.n = 3, .env = {kForceCma}, .limit = std::chrono::seconds(60), .before_join = {}};
  std::vector<float> data(std::size_t{2} << 20, 1.0f);
  auto statuses = run_with_killed_peer(job, [&data](Communicator& c) {
    return [&c, &data] {
      c.all_reduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Max);
    };
  });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_TRUE(WIFSIGNALED(statuses[1]) && WTERMSIG(statuses[1]) == SIGKILL) << statuses[1];
  EXPECT_TRUE(exited_cleanly(statuses[0])) << statuses[0];
  EXPECT_TRUE(exited_cleanly(statuses[2])) << statuses[2];
}

// The model knows cma (finite cost) but, with this machine's measured kernel
// copy (cost_model.cpp), keeps shm_direct wherever both are accepted.
TEST(CmaSelection, ModelKeepsShmDirectWhereTheKernelCopyIsSlow) {
  for (int n : {2, 4, 8}) {
    for (Collective collective : {Collective::AllReduce, Collective::Broadcast,
                                  Collective::AllGather, Collective::Scatter, Collective::Gather}) {
      for (std::size_t bytes = 4096; bytes <= (std::size_t{64} << 20); bytes *= 16) {
        algorithms::Call args;
        args.collective = collective;
        args.count = bytes;
        const auto context = algorithms::single_host_context(n);
        const algorithms::Needs provided = algorithms::kNeedsArena | algorithms::kNeedsCrossMemory;
        const algorithms::Algorithm& cma = *algorithms::find_algorithm(collective, "cma");
        EXPECT_EQ(algorithms::default_selection(args, provided, context).algorithm->name,
                  "shm_direct");
        EXPECT_TRUE(std::isfinite(algorithms::evaluate(cma, args, context).modelled_seconds));
      }
    }
  }
}

// Whether a cma algorithm takes a call is a function of what the context provides only:
// the environment is not consulted.
TEST(CmaSelection, AcceptsFollowsTheContext) {
  ::setenv("CHORUS_CMA", "0", 1);
  algorithms::Call args;
  args.collective = Collective::AllReduce;
  args.count = 4096;
  const algorithms::Algorithm& cma = algorithms::rows::allreduce_cma;
  using algorithms::kNeedsArena, algorithms::kNeedsCrossMemory;
  EXPECT_FALSE(algorithms::algorithm_accepts(cma, args, 4, algorithms::kNeedsNothing));
  EXPECT_FALSE(algorithms::algorithm_accepts(cma, args, 4, kNeedsArena));
  EXPECT_TRUE(algorithms::algorithm_accepts(cma, args, 4, kNeedsArena | kNeedsCrossMemory));
  ::unsetenv("CHORUS_CMA");
}

// The transport's reader against a forked child, which has this process's layout: two
// pages, the second inaccessible, and a word to probe.
class CmaCrossMemoryChild : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kWord = 0x5eed'0000'1234'5678ull;

  void SetUp() override {
    page_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* map =
        ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    pages_ = static_cast<unsigned char*>(map);
    ASSERT_EQ(::mprotect(pages_ + page_, page_, PROT_NONE), 0);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    ASSERT_EQ(::pipe(release_), 0);
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {  // writes its own copy of the pages, then waits for the end
      ::close(release_[1]);
      for (std::size_t i = 0; i < page_; ++i) pages_[i] = static_cast<unsigned char>(i * 7 + 1);
      std::memcpy(pages_, &kWord, sizeof(kWord));
      char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) std::_Exit(2);
      (void)!::read(release_[0], &byte, 1);
      std::_Exit(0);
    }
    ::close(ready[1]);
    ::close(release_[0]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
  }

  void TearDown() override {
    ::close(release_[1]);  // the child exits
    if (child_ > 0) ::waitpid(child_, nullptr, 0);
    ::munmap(pages_, 2 * page_);
  }

  std::uint64_t address(std::size_t offset) const {
    return reinterpret_cast<std::uint64_t>(pages_ + offset);
  }

  std::size_t page_ = 0;
  unsigned char* pages_ = nullptr;
  int release_[2] = {-1, -1};
  pid_t child_ = -1;
};

TEST_F(CmaCrossMemoryChild, ReadsTheChildsBytesNotOurs) {
  transport::CrossMemory memory;
  std::vector<unsigned char> got(page_ - 8);
  ASSERT_EQ(memory.read(child_, address(8), got.data(), got.size()), 0);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], static_cast<unsigned char>((i + 8) * 7 + 1)) << "byte " << i + 8;
  }
  EXPECT_EQ(pages_[8], 0) << "the child's write reached this process";
  std::string why;
  EXPECT_TRUE(memory.probe(child_, address(0), kWord, &why)) << why;
  EXPECT_FALSE(memory.probe(child_, address(0), kWord + 1, &why));
  EXPECT_EQ(why, "wrong probe value");
}

TEST_F(CmaCrossMemoryChild, ReadIntoAnInaccessiblePageFailsAfterTheReadableBytes) {
  transport::CrossMemory memory;
  std::vector<unsigned char> got(page_ + 64, 0);
  EXPECT_EQ(memory.read(child_, address(64), got.data(), got.size()), EFAULT);
  // The kernel stops at the page boundary (a short read); the reader went on from there.
  EXPECT_EQ(got[page_ - 65], static_cast<unsigned char>((page_ - 1) * 7 + 1));
  std::string why;
  EXPECT_FALSE(memory.probe(child_, address(page_), 0, &why));
  EXPECT_FALSE(why.empty());
}

TEST_F(CmaCrossMemoryChild, GonePeerIsRecognised) {
  using transport::CrossMemory;
  const pid_t child = child_;
  EXPECT_FALSE(CrossMemory::failed_by_exit(child, EFAULT));  // alive through the grace
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_TRUE(CrossMemory::failed_by_exit(child, EFAULT));  // dying or a zombie: gone
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  child_ = -1;
  std::uint64_t word = 0;
  const int error = CrossMemory().read(child, address(0), &word, sizeof(word));
  EXPECT_EQ(error, ESRCH);
  EXPECT_TRUE(CrossMemory::failed_by_exit(child, error));
}

TEST(CmaCrossMemory, OwnPidIsAPlainCopy) {
  transport::CrossMemory memory;
  EXPECT_EQ(memory.self(), ::getpid());
  const std::uint64_t source[2] = {11, 0x1234'5678'9abc'def0ull};
  std::uint64_t copy[2] = {};
  EXPECT_EQ(memory.read(memory.self(), reinterpret_cast<std::uint64_t>(source), copy, sizeof(copy)),
            0);
  EXPECT_EQ(copy[1], source[1]);
  std::string why;
  EXPECT_TRUE(memory.probe(memory.self(), reinterpret_cast<std::uint64_t>(source), 99, &why))
      << "the own pid is not probed";
}

}  // namespace
}  // namespace chorus::testing
