// All-to-all by cross-memory reads (src/algorithms/alltoall/cma.cpp) through communicators,
// for what the algorithm sweep (tests/algorithms: each alone on threads, every count, dtype
// and in-place mode) does not reach: across forked processes, so that process_vm_readv
// really reads another address space (a small and an odd count of several MiB per peer, in
// place and out of place, buffers at odd addresses, several calls back to back), with cma
// what ran; that peers whose memory cannot be read run shm_direct instead and report it; that
// the cost model keeps shm_direct. And shm_direct at the sizes where it copies with streaming
// stores (src/algorithms/alltoall/shm_direct.cpp): 3 and 5 ranks, a small arena (many rounds,
// pieces of odd lengths at odd addresses), buffers at odd addresses, in place.
// Expected bytes are a closed form of (sender, receiver, byte index), independent of the library.
#include "algorithms/cost_model.hpp"
#include "algorithms/selection.hpp"
#include "forked_ranks.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

constexpr std::size_t kLargeCount = 300'007;  // per peer: 0.3 to 2.4 MiB, odd
constexpr unsigned char kUntouched = 0xEE;
const char* const kForceCma = "CHORUS_ALGO=alltoall=cma";

/// Byte k of the block rank `from` sends rank `to` (`salt` tells calls apart): every input
/// bit reaches the result, so a byte from the wrong sender, receiver or offset shows.
unsigned char block_byte(int from, int to, std::size_t k, unsigned salt) {
  std::uint64_t x =
      k * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(from) * 0xBF58476D1CE4E5B9ull +
      static_cast<std::uint64_t>(to) * 0x94D049BB133111EBull + salt * 0xD6E8FEB86659FD93ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<unsigned char>(x >> 56);
}

std::string label(DataType t, std::size_t count, bool in_place) {
  return "alltoall " + std::string(to_string(t)) + " x " + std::to_string(count) +
         (in_place ? " in place" : "");
}

/// One all-to-all of `count` elements per peer; checks every byte and the algorithm.
/// The buffers start `skew` bytes into their allocations.
void alltoall_case(Communicator& c, DataType t, std::size_t count, bool in_place, unsigned salt,
                   const std::string& algorithm = "cma", std::size_t skew = 0) {
  const int n = c.size();
  const int me = c.rank();
  const std::size_t block = count * dtype_size(t);
  std::vector<unsigned char> send_bytes(block * n + skew), recv_bytes(block * n + skew, kUntouched);
  unsigned char* send = send_bytes.data() + skew;
  for (int p = 0; p < n; ++p)
    for (std::size_t k = 0; k < block; ++k) send[p * block + k] = block_byte(me, p, k, salt);
  unsigned char* out = in_place ? send : recv_bytes.data() + skew;
  const std::string what = label(t, count, in_place);
  c.all_to_all(send, out, count, t);
  if (n > 1 && count > 0) {
    rank_check(c.last_algorithm() == algorithm, what + " ran " + c.last_algorithm());
  }
  for (int p = 0; p < n; ++p) {
    for (std::size_t k = 0; k < block; ++k) {
      if (out[p * block + k] != block_byte(p, me, k, salt)) {
        rank_check(false, what + ": rank " + std::to_string(me) + " byte " + std::to_string(k) +
                              " of block " + std::to_string(p) + " is wrong");
        return;
      }
    }
  }
  if (!in_place) {
    // The input is left alone.
    for (int p = 0; p < n; ++p)
      for (std::size_t k = 0; k < block; ++k)
        if (send[p * block + k] != block_byte(me, p, k, salt)) {
          rank_check(false, what + ": the send buffer changed");
          return;
        }
  }
}

void cross_process_calls(Communicator& c, SharedPage&) {
  unsigned salt = 0;
  for (bool in_place : {false, true}) alltoall_case(c, DataType::Float16, 7, in_place, ++salt);
  alltoall_case(c, DataType::Float32, kLargeCount, false, ++salt);
  alltoall_case(c, DataType::Float64, kLargeCount, true, ++salt);
  alltoall_case(c, DataType::Uint8, kLargeCount, true, ++salt, "cma", 5);
  alltoall_case(c, DataType::Int32, kLargeCount / 3, false, ++salt, "cma", 2);
}

class AlltoallCmaProcesses : public ::testing::TestWithParam<int> {};

TEST_P(AlltoallCmaProcesses, ReadsOtherProcesses) {
  ForkedRanks job{
      .n = GetParam(), .env = {kForceCma}, .limit = std::chrono::seconds(120), .before_join = {}};
  EXPECT_EQ((forked_ranks_failures(job, cross_process_calls)), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, AlltoallCmaProcesses, ::testing::Values(2, 3, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(AlltoallCmaFallback, UnreadablePeersRunShmDirect) {
  ForkedRanks job{.n = 3,
                  .env = {kForceCma},
                  .limit = std::chrono::seconds(60),
                  .before_join = forbid_cross_memory_reads};
  auto statuses = run_forked_ranks(job, [](Communicator& c, SharedPage& page) {
    check_cross_memory_reads_refused(c, page);
    unsigned salt = 0;
    for (bool in_place : {false, true})
      for (std::size_t count : {std::size_t{7}, kLargeCount})
        alltoall_case(c, DataType::Int32, count, in_place, ++salt, "shm_direct");
  });
  for (int status : statuses) EXPECT_TRUE(exited_cleanly(status)) << status;
}

// The model knows cma for all-to-all (finite cost) but keeps shm_direct, whose two copies
// by memcpy beat one kernel copy of this machine (cost_model.cpp) at every size.
TEST(AlltoallCmaSelection, ModelKeepsShmDirect) {
  for (int n : {2, 3, 4, 8}) {
    for (std::size_t bytes = 64; bytes <= (std::size_t{16} << 20); bytes *= 16) {
      algorithms::Call args;
      args.collective = Collective::AllToAll;
      args.count = bytes;
      const auto context = algorithms::single_host_context(n);
      const algorithms::Needs provided = algorithms::kNeedsArena | algorithms::kNeedsCrossMemory;
      EXPECT_EQ(algorithms::default_selection(args, provided, context).algorithm->name,
                "shm_direct");
      EXPECT_TRUE(std::isfinite(
          algorithms::evaluate(algorithms::rows::alltoall_cma, args, context).modelled_seconds));
    }
  }
}

// shm_direct streams its copies from 8 MiB per call in all (kStreamFromBytes); a 64 KiB
// arena (32 KiB rounds) cuts such a call into dozens of rounds whose pieces have odd lengths.
class AlltoallShmDirectLarge : public ::testing::TestWithParam<int> {};

TEST_P(AlltoallShmDirectLarge, StreamedCopiesOddSizesAndAddresses) {
  ForkedRanks job{.n = GetParam(),
                  .env = {"CHORUS_ALGO=alltoall=shm_direct", "CHORUS_SHM_ARENA_BYTES=65536"},
                  .limit = std::chrono::seconds(120),
                  .before_join = {}};
  EXPECT_EQ((forked_ranks_failures(
                job,
                [](Communicator& c, SharedPage&) {
                  unsigned salt = 0;
                  // Bytes per peer of 1-byte elements: n x n of them reach kStreamFromBytes (8
                  // MiB).
                  const auto n = static_cast<std::size_t>(c.size());
                  const std::size_t odd = (std::size_t{8} << 20) / (n * n) + 3;
                  for (bool in_place : {false, true}) {
                    alltoall_case(c, DataType::Int8, odd, in_place, ++salt, "shm_direct", 1);
                    alltoall_case(c, DataType::Float16, odd / 2, in_place, ++salt, "shm_direct", 6);
                    alltoall_case(c, DataType::Float64, odd / 4, in_place, ++salt, "shm_direct");
                    alltoall_case(c, DataType::Int32, 7, in_place, ++salt, "shm_direct", 3);
                  }
                })),
            "");
}

// All-to-all-v streams per rank and per side (alltoallv/shm_direct.cpp): pairs of odd
// rank sum move ~1.4 MiB, the others 5 elements, so with 3 ranks rank 1 streams both
// ways (3 MiB x 3) and ranks 0 and 2 do not; a 256 KiB arena makes every stream take several
// rounds.
TEST_P(AlltoallShmDirectLarge, AlltoallvStreamsWhereItsOwnBytesAreLarge) {
  ForkedRanks job{.n = GetParam(),
                  .env = {"CHORUS_ALGO=alltoallv=shm_direct", "CHORUS_SHM_ARENA_BYTES=262144"},
                  .limit = std::chrono::seconds(120),
                  .before_join = {}};
  EXPECT_EQ((forked_ranks_failures(
                job,
                [](Communicator& c, SharedPage&) {
                  const int n = c.size();
                  const int me = c.rank();
                  const auto count = [](int from, int to) -> std::size_t {
                    return (from + to) % 2 == 1 ? 1'500'007 : 5;
                  };
                  std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
                  std::size_t sent = 1, received = 3;  // odd offsets: blocks at odd addresses
                  for (int p = 0; p < n; ++p) {
                    sc[p] = count(me, p);
                    sd[p] = sent;
                    sent += sc[p];
                    rc[p] = count(p, me);
                    rd[p] = received;
                    received += rc[p];
                  }
                  std::vector<unsigned char> send(sent), recv(received, kUntouched);
                  for (int p = 0; p < n; ++p)
                    for (std::size_t k = 0; k < sc[p]; ++k)
                      send[sd[p] + k] = block_byte(me, p, k, 77);
                  c.all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, DataType::Uint8);
                  rank_check(c.last_algorithm() == "shm_direct",
                             "alltoallv ran " + c.last_algorithm());
                  for (int p = 0; p < n; ++p)
                    for (std::size_t k = 0; k < rc[p]; ++k)
                      if (recv[rd[p] + k] != block_byte(p, me, k, 77)) {
                        rank_check(false, "alltoallv: byte " + std::to_string(k) + " from rank " +
                                              std::to_string(p) + " is wrong");
                        return;
                      }
                })),
            "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, AlltoallShmDirectLarge, ::testing::Values(3, 5),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace chorus::testing
