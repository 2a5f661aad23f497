// HostArena's reuse rules (host_arena.hpp), two arenas of one segment driven by
// hand in two threads: how far a rank may run ahead of one that stopped in a
// round — kLanes - 1 small rounds, one round in the halves — and that it goes on
// as soon as the slow rank posts. Blocking is shown by a rank that has not
// advanced after a pause; the pause only has to outlast a few begin_round calls.
#include "bootstrap/store.hpp"
#include "transport/arena/host_arena.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kSmall = 64;  // bytes per round: a lane
constexpr auto kPause = 200ms;      // long enough to see a rank not advancing

Deadline soon() { return Clock::now() + 20s; }

std::string token() {
  std::random_device device;
  return "unit-" + std::to_string(device()) + std::to_string(device());
}

/// `n` arenas on one segment (ranks 0..n-1), connected from n threads, in one call.
struct Arenas {
  std::unique_ptr<Store> store = make_memory_store();
  std::vector<std::unique_ptr<HostArena>> arena;

  explicit Arenas(int n) : arena(static_cast<std::size_t>(n)) {
    const std::string name = token();
    std::vector<std::thread> others;
    for (int r = 1; r < n; ++r) {
      others.emplace_back([&, r] {
        arena[static_cast<std::size_t>(r)] = HostArena::connect(*store, r, n, name, soon());
      });
    }
    arena[0] = HostArena::connect(*store, 0, n, name, soon());
    for (auto& t : others) t.join();
    Fingerprint call;
    call.seq = 1;
    call.collective = Collective::Broadcast;
    for (auto& a : arena) a->begin_call(call, Clock::now());
  }
};

struct ArenaPair : Arenas {
  ArenaPair() : Arenas(2) {}
};

/// Rank 0 begins and posts `rounds` rounds of `bytes` each in a thread, counting them.
struct Runner {
  std::atomic<int> done{0};
  std::thread thread;
  Runner(HostArena& arena, int rounds, std::size_t bytes) {
    thread = std::thread([&arena, rounds, bytes, this] {
      for (int i = 0; i < rounds; ++i) {
        const std::uint64_t g = arena.begin_round(soon(), bytes);
        std::memset(arena.buffer(0, g), i + 1, bytes == HostArena::kWholeRound ? 64 : bytes);
        arena.post(2 * g);
        done.store(i + 1);
      }
    });
  }
  ~Runner() { thread.join(); }
};

TEST(HostArena, SmallRoundsRunUpToAllLanesAheadThenWait) {
  ArenaPair pair;
  HostArena& slow = *pair.arena[1];
  // The slow rank enters round 1 (posts 2: it read nothing before) and stops there.
  const std::uint64_t first = slow.begin_round(soon(), kSmall);
  ASSERT_EQ(first, 1u);
  slow.post(2);
  Runner fast(*pair.arena[0], kLanes + 1, kSmall);
  std::this_thread::sleep_for(kPause);
  // Rounds 1..kLanes reuse no lane the slow rank may still read; round kLanes + 1
  // takes round 1's lane, which the slow rank is reading.
  EXPECT_EQ(fast.done.load(), kLanes);
  // What the slow rank reads of round 1 is still round 1's.
  slow.wait_for(0, 2, soon());
  EXPECT_EQ(static_cast<int>(slow.buffer(0, 1)[0]), 1);
  // Entering round 2 says it finished reading round 1: the fast rank goes on.
  EXPECT_EQ(slow.begin_round(soon(), kSmall), 2u);
  slow.post(4);
  for (int i = 0; i < 1000 && fast.done.load() < kLanes + 1; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(fast.done.load(), kLanes + 1);
}

TEST(HostArena, RoundsInTheHalvesRunOneAhead) {
  ArenaPair pair;
  HostArena& slow = *pair.arena[1];
  ASSERT_EQ(slow.begin_round(soon()), 1u);
  slow.post(2);
  Runner fast(*pair.arena[0], 3, HostArena::kWholeRound);
  std::this_thread::sleep_for(kPause);
  // Round 2 uses the other half; round 3 takes round 1's half.
  EXPECT_EQ(fast.done.load(), 2);
  EXPECT_EQ(slow.begin_round(soon()), 2u);
  slow.post(4);
  for (int i = 0; i < 1000 && fast.done.load() < 3; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(fast.done.load(), 3);
}

TEST(HostArena, ARoundInAHalfAfterSmallOnesWaitsForThePreviousRound) {
  ArenaPair pair;
  HostArena& slow = *pair.arena[1];
  ASSERT_EQ(slow.begin_round(soon(), kSmall), 1u);
  slow.post(2);
  // Rounds 1 and 2 small (lanes 1, 2), round 3 in a half: it needs every rank out of
  // round 2, so the fast rank stops after round 2 although the half is unused.
  std::atomic<int> done{0};
  std::thread fast([&] {
    HostArena& a = *pair.arena[0];
    for (int i = 0; i < 3; ++i) {
      const std::uint64_t g = a.begin_round(soon(), i < 2 ? kSmall : HostArena::kWholeRound);
      a.post(2 * g);
      done.store(i + 1);
    }
  });
  std::this_thread::sleep_for(kPause);
  EXPECT_EQ(done.load(), 2);
  ASSERT_EQ(slow.begin_round(soon(), kSmall), 2u);
  slow.post(4);
  ASSERT_EQ(slow.begin_round(soon(), HostArena::kWholeRound), 3u);
  slow.post(6);
  fast.join();
  EXPECT_EQ(done.load(), 3);
}

// Rank 0 takes the ranks' parts in the order they post: rank 2 first, then rank 1,
// which posts only once rank 0 has taken rank 2's (read in rank order, rank 0
// would wait for rank 1 forever).
TEST(HostArena, ForEachReadyTakesRanksInTheOrderTheyPost) {
  Arenas arenas(3);
  std::atomic<bool> took_two{false};
  std::vector<int> order;
  std::thread two([&] {
    HostArena& a = *arenas.arena[2];
    a.begin_round(soon(), kSmall);
    a.post(2);
  });
  std::thread one([&] {
    HostArena& a = *arenas.arena[1];
    a.begin_round(soon(), kSmall);
    for (int i = 0; i < 5000 && !took_two.load(); ++i) std::this_thread::sleep_for(1ms);
    a.post(2);
  });
  HostArena& zero = *arenas.arena[0];
  zero.begin_round(soon(), kSmall);
  zero.post(2);
  zero.for_each_ready(2, soon(), [&](int r) {
    order.push_back(r);
    if (r == 2) took_two.store(true);
  });
  one.join();
  two.join();
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

// Tiny rounds keep their data in the record line; that line is reused by rounds of every
// kind (here tiny, small and whole rounds in turn, past all lanes twice), and each rank
// still reads the other's data of every round.
TEST(HostArena, TinyRoundsCarryTheirDataThroughRecordLinesOfEveryKind) {
  ArenaPair pair;
  const std::size_t sizes[] = {8, kInlineBytes, kSmall, HostArena::kWholeRound, 1};
  const int rounds = 3 * kLanes + 1;
  // A byte per (round, rank), distinct between the two ranks' rounds and their neighbours.
  auto value = [](int i, int r) { return static_cast<int>((2 * i + r + 1) % 251); };
  auto run = [&](int me) {
    HostArena& a = *pair.arena[static_cast<std::size_t>(me)];
    const int other = 1 - me;
    for (int i = 0; i < rounds; ++i) {
      const std::size_t bytes = sizes[i % 5];
      const std::size_t used = bytes == HostArena::kWholeRound ? 64 : bytes;
      const std::uint64_t g = a.begin_round(soon(), bytes);
      std::memset(a.buffer(me, g), value(i, me), used);
      a.post(2 * g);
      a.wait_for(other, 2 * g, soon());
      const std::byte* theirs = a.buffer(other, g);
      for (std::size_t b = 0; b < used; ++b) {
        ASSERT_EQ(static_cast<int>(theirs[b]), value(i, other)) << "round " << g << " byte " << b;
      }
    }
  };
  std::thread one([&] { run(1); });
  run(0);
  one.join();
}

// A peer in another call whose round is not tiny never sets the record line's `posted`
// word: the waiting rank still sees its flag and reports the mismatch (no hang).
TEST(HostArena, APeerWhoseRoundIsNotTinyIsAMismatchNotATimeout) {
  ArenaPair pair;
  Fingerprint tiny, larger;
  tiny.seq = larger.seq = 2;
  tiny.collective = larger.collective = Collective::AllReduce;
  tiny.count = 2;
  larger.count = 100;
  HostArena& zero = *pair.arena[0];
  HostArena& one = *pair.arena[1];
  zero.begin_call(tiny, Clock::now());
  one.begin_call(larger, Clock::now());
  zero.begin_round(soon(), 8);
  zero.post(2);
  one.begin_round(soon(), 400);
  one.post(2);
  for (HostArena* a : {&zero, &one}) {
    try {
      a->wait_for(1 - a->rank(), 2, Clock::now() + 5s);
      ADD_FAILURE() << "rank " << a->rank() << " took the other call's round";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Mismatch) << e.what();
    }
  }
}

/// Counts the passes; throws `broken` from every check once it is set.
struct CountingWatcher : Liveness {
  int full = 0, quick = 0;
  std::optional<Error> broken;
  void arena_check(const Fingerprint&, bool) override {
    ++full;
    if (broken) throw *broken;
  }
  [[noreturn]] void arena_fail(const Error& error) override { throw error; }
  std::optional<Error> arena_lost(int) override { return std::nullopt; }
  void arena_throw_if_broken() override {
    ++quick;
    if (broken) throw *broken;
  }
};

// Back-to-back calls run the full pass (progress, ABORT frames, dead peers) once per
// millisecond of their start times and only the broken check in between; a broken
// transport fails every call.
TEST(HostArena, BeginCallRunsTheFullWatcherPassAtMostEveryMillisecond) {
  ArenaPair pair;
  CountingWatcher watcher;
  HostArena& arena = *pair.arena[0];
  arena.set_liveness(&watcher);
  Fingerprint call;
  call.collective = Collective::Broadcast;
  const auto start = Clock::now();
  // 5 ms of calls 10 us apart: a pass at 0, 1, 2, 3 and 4 ms.
  for (int i = 0; i < 500; ++i) {
    call.seq = static_cast<std::uint64_t>(i) + 2;
    arena.begin_call(call, start + i * 10us);
  }
  EXPECT_EQ(watcher.full, 5);
  EXPECT_EQ(watcher.quick, 495);
  arena.begin_call(call, start + 5ms - 1us);
  EXPECT_EQ(watcher.full, 5) << "the pass at 4 ms holds until 5 ms";
  arena.begin_call(call, start + 7ms);
  EXPECT_EQ(watcher.full, 6) << "a pass is due a millisecond after the last";
  arena.begin_call(call, start + 7ms + 1us);
  EXPECT_EQ(watcher.full, 6);
  watcher.broken = Error(Status::RemoteError, "rank 1 aborted");
  EXPECT_THROW(arena.begin_call(call, start + 7ms + 2us), Error) << "the quick check fails it";
  EXPECT_THROW(arena.begin_call(call, start + 9ms), Error) << "the full pass fails it";
  EXPECT_EQ(watcher.full, 7);
  arena.set_liveness(nullptr);
}

}  // namespace
}  // namespace chorus::transport
