// Store exchanges (bootstrap/store_exchange.hpp): the all-gather and the barrier return
// every member's value in member order, cost a member a few requests whatever the group's
// size, and time out with a sentence that names who is missing.
#include "bootstrap/counting_store.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_exchange.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

/// What each member of a store all-gather run in threads got, and its store requests.
struct Gathered {
  std::vector<std::vector<std::string>> results;
  std::vector<int> requests;
};

/// Member i (a thread) all-gathers value(members[i]) over one memory store, then, with
/// `barrier`, meets the others in a store barrier.
Gathered gather_in_threads(const std::vector<int>& members, std::string (*value)(int),
                           bool barrier) {
  auto base = std::shared_ptr<Store>(make_memory_store());
  const int n = static_cast<int>(members.size());
  Gathered out{std::vector<std::vector<std::string>>(members.size()),
               std::vector<int>(members.size())};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const auto at = static_cast<std::size_t>(i);
      CountingStore store(*base);
      const int rank = members[at];
      out.results[at] =
          store_all_gather(store, "x", members, rank, value(rank), deadline_after(30s));
      if (barrier) store_barrier(store, "b", n, deadline_after(30s));
      out.requests[at] = store.requests();
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(out.results[i].size(), members.size());
    for (std::size_t j = 0; j < out.results[i].size(); ++j) {
      EXPECT_EQ(out.results[i][j], value(members[j])) << "member " << i << ", entry " << j;
    }
  }
  return out;
}

TEST(StoreExchange, AllGatherOfASubsetInMemberOrderWithFewRequestsEach) {
  const std::vector<int> members = {5, 2, 9, 0, 7, 3, 11, 1};  // any order, the same on all
  const int n = static_cast<int>(members.size());
  const Gathered got = gather_in_threads(
      members, [](int rank) { return "v" + std::string(rank, ':') + "\n"; }, /*barrier=*/true);
  EXPECT_EQ(got.requests[0], 1 + 1 + (n - 1) + 1 + 2)
      << "the leader: set, wait, n - 1 gets, set, barrier";
  for (int i = 1; i < n; ++i) {
    EXPECT_LE(got.requests[static_cast<std::size_t>(i)], 4) << "member " << i;
  }
}

// 300 members: blocks of 16 gathered by their first member, blocks of 256 by theirs, and the
// whole list by member 0; a member that leads nothing makes 2 requests, member 0 a few per level.
TEST(StoreExchange, AllGatherOfManyMembersIsATreeOfFewRequestsEach) {
  const int n = 300;
  std::vector<int> members;
  for (int i = 0; i < n; ++i) members.push_back((i * 7) % n);  // 7 is prime to 300: a shuffle
  const Gathered got = gather_in_threads(
      members, [](int rank) { return std::to_string(rank); }, /*barrier=*/false);
  for (int i = 0; i < n; ++i) {
    if (i % 16 != 0) {
      EXPECT_EQ(got.requests[static_cast<std::size_t>(i)], 2) << "member " << i;
    }
  }
  // set; 16 + 1 per level of 16 and of 256 (wait, 15 gets, set); wait and 1 get; set the whole.
  EXPECT_EQ(got.requests[0], 1 + 17 + 17 + 2 + 1);
  EXPECT_EQ(got.requests[16], 1 + 17 + 1) << "a leader of 16 members: its block's value, the whole";
}

TEST(StoreExchange, AllGatherTimeoutNamesTheMissingMembers) {
  auto store = make_memory_store();
  store->set("x/0", "here");  // the leader arrived; ranks 2 and 1 never do
  try {
    store_all_gather(*store, "x", {0, 2, 1, 3}, 3, "mine", deadline_after(50ms));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
    EXPECT_NE(std::string(e.what()).find("'x/2', 'x/1'"), std::string::npos) << e.what();
  }
}

TEST(StoreExchange, BarrierTimeoutSaysHowManyArrived) {
  auto store = make_memory_store();
  std::thread other(
      [&] { EXPECT_THROW(store_barrier(*store, "b", 3, deadline_after(100ms)), Error); });
  try {
    store_barrier(*store, "b", 3, deadline_after(100ms));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
    EXPECT_EQ(std::string(e.what()), "timed out at the rendezvous step 'b': 2 of 3 ranks arrived");
  }
  other.join();
}

}  // namespace
}  // namespace chorus
