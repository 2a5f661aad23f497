// Unit tests of the transport's pieces, without a mesh: the SPSC ring, the
// rendezvous record, the ABORT frame, the doorbell, shared-memory segments and
// the per-peer framing/matching over a scripted link (garbage on the wire).
#include "transport/abort_frame.hpp"
#include "transport/arena/host_arena.hpp"
#include "transport/arena/segment.hpp"
#include "transport/doorbell.hpp"
#include "transport/peer_channel.hpp"
#include "transport/rank_info.hpp"
#include "transport/shm/ring.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/shm_budget.hpp"
#include "transport/wait_policy.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;

TEST(Ring, StreamsThroughWrapAroundBetweenTwoThreads) {
  shm::RingControl control;
  alignas(64) static std::byte data[4096];
  shm::Ring producer(&control, data, sizeof(data));
  shm::Ring consumer(&control, data, sizeof(data));
  std::vector<unsigned char> stream(300000), received;
  std::mt19937 random(7);
  for (auto& b : stream) b = static_cast<unsigned char>(random());
  std::thread writer([&] {
    std::mt19937 sizes(1);
    for (std::size_t done = 0; done < stream.size();) {
      std::size_t want = std::min<std::size_t>(1 + sizes() % 5000, stream.size() - done);
      done += producer.write(stream.data() + done, want);
      std::this_thread::yield();
    }
    producer.close_producer();
  });
  std::mt19937 sizes(2);
  while (!consumer.producer_gone_and_drained()) {
    unsigned char chunk[6000];
    std::size_t n = consumer.read(chunk, 1 + sizes() % sizeof(chunk));
    received.insert(received.end(), chunk, chunk + n);
    if (n == 0) std::this_thread::yield();
  }
  writer.join();
  EXPECT_TRUE(received == stream);
}

TEST(Ring, FullAndEmptyAndClosedFlags) {
  shm::RingControl control;
  alignas(64) static std::byte data[4096];
  shm::Ring ring(&control, data, sizeof(data));
  std::vector<char> big(5000, 'a');
  EXPECT_EQ(ring.write(big.data(), big.size()), 4096u);
  EXPECT_EQ(ring.write(big.data(), 1), 0u);
  EXPECT_EQ(ring.read(big.data(), 100), 100u);
  EXPECT_EQ(ring.write(big.data(), 1000), 100u);
  ring.close_producer();
  EXPECT_FALSE(ring.producer_gone_and_drained());  // bytes are still in the ring
  EXPECT_EQ(ring.read(big.data(), big.size()), 4096u);
  EXPECT_TRUE(ring.producer_gone_and_drained());
  EXPECT_FALSE(ring.consumer_closed());
  ring.close_consumer();
  EXPECT_TRUE(ring.consumer_closed());
}

TEST(RankInfo, RoundTripAndMalformedRecords) {
  RankInfo info{"host:with\nodd 5:bytes", 4242, "10.0.0.7", 50123, random_token()};
  RankInfo back = decode_rank_info(encode(info), 3);
  EXPECT_EQ(back.host, info.host);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.address, "10.0.0.7");
  EXPECT_EQ(back.port, 50123);
  EXPECT_EQ(back.token, info.token);
  EXPECT_EQ(info.token.size(), 32u);
  EXPECT_NE(info.token, random_token());
  std::vector<std::string> malformed = {"",
                                        "5:abc",
                                        "1:a1:b1:c1:d1:e",
                                        "1:a2:121:x5:999991:t",
                                        encode(info) + "x",
                                        "99999999999999999999:a"};
  for (const std::string& bad : malformed) {
    try {
      decode_rank_info(bad, 3);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::RemoteError);
      EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos);
    }
  }
}

TEST(RankInfo, TopologyNumbersHostsByFirstAppearance) {
  std::vector<RankInfo> infos(5);
  const char* hosts[] = {"y", "x", "y", "z", "x"};
  for (int r = 0; r < 5; ++r) infos[r].host = hosts[r];
  Topology topology = topology_of(infos);
  EXPECT_EQ(topology.host_of_rank, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(topology.num_hosts, 3);
  EXPECT_EQ(topology.ranks_on_host(1), 2);
}

std::span<const std::byte> payload_of(const std::vector<std::byte>& frame) {
  return std::span<const std::byte>(frame).subspan(sizeof(FrameHeader));
}

TEST(AbortFrame, CarriesStatusAndSentence) {
  auto frame = make_abort_frame(Status::Mismatch, "rank 2 is in allreduce #1");
  FrameHeader header;
  std::memcpy(&header, frame.data(), sizeof(header));
  EXPECT_EQ(header.magic, kFrameMagic);
  EXPECT_EQ(header.kind, static_cast<std::uint8_t>(FrameKind::Abort));
  EXPECT_EQ(header.payload_bytes, frame.size() - sizeof(header));
  Error mismatch = error_from_abort(2, payload_of(frame));
  EXPECT_EQ(mismatch.status(), Status::Mismatch);
  EXPECT_STREQ(mismatch.what(), "rank 2 aborted: rank 2 is in allreduce #1");
  Error other = error_from_abort(5, payload_of(make_abort_frame(Status::Timeout, "slow")));
  EXPECT_EQ(other.status(), Status::RemoteError);
  EXPECT_STREQ(other.what(), "rank 5 aborted: slow");
  EXPECT_LE(make_abort_frame(Status::Timeout, std::string(100000, 'x')).size(), 4200u);
  EXPECT_EQ(error_from_abort(1, {}).status(), Status::RemoteError);
}

TEST(Doorbell, RingWakesASleeperAndSleepIsBounded) {
  DoorbellWord word;
  Doorbell bell(&word);
  std::uint32_t sequence = bell.arm();
  auto start = Clock::now();
  std::thread ringer([&] {
    std::this_thread::sleep_for(50ms);
    bell.ring();
  });
  bell.sleep(sequence, 5000);
  bell.disarm();
  ringer.join();
  EXPECT_LT(Clock::now() - start, 2s);
  // A ring between arm() and sleep() is not lost.
  sequence = bell.arm();
  bell.ring();
  start = Clock::now();
  bell.sleep(sequence, 5000);
  EXPECT_LT(Clock::now() - start, 1s);
  sequence = bell.arm();
  start = Clock::now();
  bell.sleep(sequence, 30);
  bell.disarm();
  bell.disarm();
  EXPECT_GE(Clock::now() - start, 25ms);
}

TEST(Segment, OpensThroughItsLocatorUntilWithdrawn) {
  auto created = Segment::create("chorus-unit-" + random_token(), 8192);
  const std::string locator = created->locator();
  ASSERT_FALSE(locator.empty());
  EXPECT_THROW(Segment::open(locator, 4096, deadline_after(5s)), Error);
  auto opened = Segment::open(locator, 8192, deadline_after(5s));
  created->base()[100] = std::byte{42};
  EXPECT_EQ(opened->base()[100], std::byte{42});
  EXPECT_TRUE(opened->locator().empty()) << "only the creator hands it out";
  created->withdraw();
  EXPECT_TRUE(created->locator().empty());
  EXPECT_EQ(opened->base()[100], std::byte{42});  // still mapped
  EXPECT_THROW(Segment::open(locator, 8192, deadline_after(5s)), Error);
}

TEST(Segment, RefusesUnknownLocators) {
  std::string locator;
  {
    auto gone = Segment::create("chorus-unit-gone", 4096);
    locator = gone->locator();
  }
  EXPECT_THROW(Segment::open(locator, 4096, deadline_after(5s)), Error) << "its owner is gone";
  for (const char* bad : {"", "chorus-fd-nobody", "12:3:4"}) {
    EXPECT_THROW(Segment::open(bad, 4096, deadline_after(5s)), Error) << bad;
  }
}

TEST(Segment, AnOwnerThatNeverAnswersFailsAtTheDeadline) {
  // A listener that accepts nothing: connecting works (the backlog), no descriptor comes.
  const std::string name = "chorus-fd-silent-" + random_token();
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  const auto start = Clock::now();
  try {
    Segment::open(name, 4096, deadline_after(300ms));
    ADD_FAILURE() << "a silent owner handed out a segment";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::SystemError) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_LT(Clock::now() - start, 3s);
  ::close(listener);
}

/// Kilobytes of `base`'s mapping present in this process's page tables (smaps' Rss).
std::size_t mapped_kib(const std::byte* base) {
  std::ifstream smaps("/proc/self/smaps");
  char start_text[32];
  std::snprintf(start_text, sizeof(start_text), "%lx-", reinterpret_cast<unsigned long>(base));
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind(start_text, 0) == 0) inside = true;
    if (inside && line.rfind("Rss:", 0) == 0) return std::stoul(line.substr(4));
  }
  return ~std::size_t{0};
}

TEST(Segment, AnOpenerMapsPageTablesOnlyWhereItPopulates) {
  const std::size_t bytes = std::size_t{1} << 20;
  auto created = Segment::create("chorus-unit-" + random_token(), bytes);
  EXPECT_EQ(mapped_kib(created->base()), 1024u) << "the creator's mapping is populated";
  auto opened = Segment::open(created->locator(), bytes, deadline_after(5s));
  EXPECT_EQ(mapped_kib(opened->base()), 0u);
  opened->populate(64 * 1024 + 100, 128 * 1024);  // from inside a page: that page too
  EXPECT_EQ(mapped_kib(opened->base()), 132u);
  opened->populate(bytes - 10, 1 << 30);  // clamped to the segment
  EXPECT_EQ(mapped_kib(opened->base()), 136u);
}

TEST(Segment, NeverAppearsInDevShm) {
  const auto chorus_entries = [] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = entry.path().filename();
      if (name.find("chorus") != std::string::npos) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = chorus_entries();
  auto created = Segment::create("chorus-unit-" + random_token(), 8192);
  auto opened = Segment::open(created->locator(), 8192, deadline_after(5s));
  EXPECT_EQ(chorus_entries(), before);
}

TEST(Segment, AllocatesEveryPageAtCreation) {
  // A sparse segment would take its page faults (or a SIGBUS when memory is
  // short) in the first collectives that touch it.
  const std::size_t bytes = std::size_t{3} << 20;
  auto created = Segment::create("chorus-unit-" + random_token(), bytes);
  const int fd = receive_fd(created->locator(), deadline_after(5s));
  struct stat info {};
  ASSERT_EQ(::fstat(fd, &info), 0);
  ::close(fd);
  EXPECT_GE(static_cast<std::size_t>(info.st_blocks) * 512, bytes);
  EXPECT_EQ(created->base()[bytes - 1], std::byte{0});
}

TEST(ShmBudget, EightRanksKeepTheFullSizesAndAHostsPartsStayWithinTheirBudgets) {
  constexpr std::uint64_t KiB = 1024;
  for (int n = 1; n <= 8; ++n) {
    EXPECT_EQ(shm_budget::ring_bytes(n), 1024 * KiB) << n;
    EXPECT_EQ(shm_budget::arena_slot_bytes(n), 4096 * KiB) << n;
    EXPECT_EQ(shm_budget::arena_lane_bytes(n), 4 * KiB) << n;
  }
  EXPECT_EQ(shm_budget::ring_bytes(9), 512 * KiB);
  EXPECT_EQ(shm_budget::ring_bytes(64), 16 * KiB);
  EXPECT_EQ(shm_budget::ring_bytes(128), 4 * KiB);
  EXPECT_EQ(shm_budget::ring_bytes(512), 256u);
  EXPECT_EQ(shm_budget::ring_bytes(100000), 256u);  // the floor
  EXPECT_EQ(shm_budget::arena_slot_bytes(512), 64 * KiB);
  EXPECT_EQ(shm_budget::arena_slot_bytes(4096), 512 * KiB);  // 128 bytes per rank
  EXPECT_EQ(shm_budget::arena_lane_bytes(512), 512u);
  for (int n = 9; n <= 4096; ++n) {
    const auto ranks = static_cast<std::uint64_t>(n);
    const std::uint64_t ring = shm_budget::ring_bytes(n);
    const std::uint64_t slot = shm_budget::arena_slot_bytes(n);
    const std::uint64_t lane = shm_budget::arena_lane_bytes(n);
    if (ring > shm_budget::kRingFloor) {
      EXPECT_LE(ranks * (ranks - 1) * ring, 64 * KiB * KiB) << n;
      EXPECT_GT(2 * ranks * (ranks - 1) * ring, 64 * KiB * KiB) << n << ": the largest that fits";
    }
    if (slot > 128 * ranks) {
      EXPECT_LE(ranks * slot, 32 * KiB * KiB) << n;
    }
    EXPECT_GE(slot, 128 * ranks) << n;
    if (lane > shm_budget::kLaneFloor) {
      EXPECT_LE(ranks * kLanes * lane, 16 * KiB * KiB) << n;
    }
    EXPECT_LE(ring, shm_budget::ring_bytes(n - 1)) << n << ": never grows with the ranks";
    EXPECT_LE(lane, shm_budget::arena_lane_bytes(n - 1)) << n;
  }
}

TEST(ShmRings, FollowTheHostBudgetUnlessTheEnvironmentFixesThem) {
  ::unsetenv("CHORUS_SHM_RING_BYTES");
  for (int n : {2, 8, 9, 64, 512}) EXPECT_EQ(shm::ring_capacity(n), shm_budget::ring_bytes(n));
  ::setenv("CHORUS_SHM_RING_BYTES", "65536", 1);
  EXPECT_EQ(shm::ring_capacity(2), 65536u);
  EXPECT_EQ(shm::ring_capacity(1000), 65536u) << "an explicit size is kept";
  ::setenv("CHORUS_SHM_RING_BYTES", "65537", 1);
  EXPECT_THROW(shm::ring_capacity(2), Error);
  ::setenv("CHORUS_SHM_RING_BYTES", "128", 1);
  EXPECT_THROW(shm::ring_capacity(2), Error);
  ::unsetenv("CHORUS_SHM_RING_BYTES");
}

TEST(HostArenaSlots, FollowTheHostBudgetUnlessTheEnvironmentFixesThem) {
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
  for (int n : {2, 8, 9, 64, 512}) {
    EXPECT_EQ(HostArena::slot_bytes_for(n), shm_budget::arena_slot_bytes(n));
  }
  ::setenv("CHORUS_SHM_ARENA_BYTES", "1048576", 1);
  EXPECT_EQ(HostArena::slot_bytes_for(512), 1048576u) << "an explicit size is kept";
  ::unsetenv("CHORUS_SHM_ARENA_BYTES");
}

TEST(WaitPolicy, PollsWithACoreEachAndYieldsAtOnceWhenOversubscribed) {
  using std::chrono::microseconds;
  const WaitPolicy own_core = WaitPolicy::for_counts(2, 2);
  EXPECT_EQ(own_core.spin, microseconds(20));
  EXPECT_EQ(own_core.yield, microseconds(30));
  const WaitPolicy shared = WaitPolicy::for_counts(3, 2);
  EXPECT_EQ(shared.spin, microseconds(0));
  EXPECT_EQ(shared.yield, microseconds(1000));
  EXPECT_FALSE(own_core.cores_shared);
  EXPECT_TRUE(shared.cores_shared);

  const auto start = Clock::now();
  Backoff backoff(own_core, start);
  EXPECT_EQ(backoff.next(start + microseconds(5)), Backoff::Action::Spin);
  EXPECT_EQ(backoff.next(start + microseconds(25)), Backoff::Action::Yield);
  EXPECT_EQ(backoff.next(start + microseconds(60)), Backoff::Action::Sleep);
  backoff.restart(start + microseconds(60));
  EXPECT_EQ(backoff.next(start + microseconds(61)), Backoff::Action::Spin);
  EXPECT_EQ(Backoff(shared, start).next(start), Backoff::Action::Yield);
}

TEST(WaitPolicy, SleepsAtOnceWhenRanksOutnumberCoresManyTimesOver) {
  using std::chrono::microseconds;
  const WaitPolicy busy = WaitPolicy::for_counts(8 * 2, 2);
  EXPECT_EQ(busy.yield, microseconds(1000)) << "8 ranks per CPU still yield first";
  const WaitPolicy crowded = WaitPolicy::for_counts(8 * 2 + 1, 2);
  EXPECT_EQ(crowded.spin, microseconds(0));
  EXPECT_EQ(crowded.yield, microseconds(0));
  EXPECT_TRUE(crowded.cores_shared);
  const auto start = Clock::now();
  EXPECT_EQ(Backoff(crowded, start).next(start), Backoff::Action::Sleep);
}

TEST(WaitPolicy, EnvironmentOverridesAndRejectsMalformedValues) {
  ::setenv("CHORUS_SPIN_US", "7", 1);
  ::setenv("CHORUS_YIELD_US", "0", 1);
  const WaitPolicy policy = WaitPolicy::for_host(1);
  EXPECT_EQ(policy.spin, std::chrono::microseconds(7));
  EXPECT_EQ(policy.yield, std::chrono::microseconds(0));
  ::setenv("CHORUS_SPIN_US", "-3", 1);
  EXPECT_THROW(WaitPolicy::for_host(1), Error);
  ::setenv("CHORUS_SPIN_US", "12us", 1);
  try {
    WaitPolicy::for_host(1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CHORUS_SPIN_US"), std::string::npos) << e.what();
  }
  ::unsetenv("CHORUS_SPIN_US");
  ::unsetenv("CHORUS_YIELD_US");
}

}  // namespace
}  // namespace chorus::transport
