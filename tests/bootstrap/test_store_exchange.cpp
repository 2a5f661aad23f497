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

TEST(StoreExchange, AllGatherOfASubsetInMemberOrderWithFewRequestsEach) {
  auto base = std::shared_ptr<Store>(make_memory_store());
  const std::vector<int> members = {5, 2, 9, 0, 7, 3, 11, 1};  // any order, the same on all
  const int n = static_cast<int>(members.size());
  std::vector<std::vector<std::string>> results(members.size());
  std::vector<int> requests(members.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      CountingStore store(*base);
      const int rank = members[static_cast<std::size_t>(i)];
      results[static_cast<std::size_t>(i)] = store_all_gather(
          store, "x", members, rank, "v" + std::string(rank, ':') + "\n", deadline_after(10s));
      store_barrier(store, "b", n, deadline_after(10s));
      requests[static_cast<std::size_t>(i)] = store.requests();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(results[static_cast<std::size_t>(i)].size(), members.size());
    for (std::size_t j = 0; j < members.size(); ++j) {
      EXPECT_EQ(results[static_cast<std::size_t>(i)][j], "v" + std::string(members[j], ':') + "\n");
    }
  }
  EXPECT_EQ(requests[0], 1 + 1 + (n - 1) + 1 + 2)
      << "the leader: set, wait, n - 1 gets, set, barrier";
  for (int i = 1; i < n; ++i) EXPECT_LE(requests[static_cast<std::size_t>(i)], 4) << "member " << i;
}

// 300 members: blocks of 16 gathered by their first member, blocks of 256 by theirs, and the
// whole list by member 0; a member that leads nothing makes 2 requests, member 0 a few per level.
TEST(StoreExchange, AllGatherOfManyMembersIsATreeOfFewRequestsEach) {
  auto base = std::shared_ptr<Store>(make_memory_store());
  const int n = 300;
  std::vector<int> members;
  for (int i = 0; i < n; ++i) members.push_back((i * 7) % n);  // 7 is prime to 300: a shuffle
  std::vector<std::vector<std::string>> results(members.size());
  std::vector<int> requests(members.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      CountingStore store(*base);
      const int rank = members[static_cast<std::size_t>(i)];
      results[static_cast<std::size_t>(i)] =
          store_all_gather(store, "x", members, rank, std::to_string(rank), deadline_after(30s));
      requests[static_cast<std::size_t>(i)] = store.requests();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(results[static_cast<std::size_t>(i)].size(), members.size());
    for (std::size_t j = 0; j < members.size(); ++j) {
      ASSERT_EQ(results[static_cast<std::size_t>(i)][j], std::to_string(members[j]));
    }
    if (i % 16 != 0) {
      EXPECT_EQ(requests[static_cast<std::size_t>(i)], 2) << "member " << i;
    }
  }
  // set; 16 + 1 per level of 16 and of 256 (wait, 15 gets, set); wait and 1 get; set the whole.
  EXPECT_EQ(requests[0], 1 + 17 + 17 + 2 + 1);
  EXPECT_EQ(requests[16], 1 + 17 + 1) << "a leader of 16 members: its block's value, the whole";
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
