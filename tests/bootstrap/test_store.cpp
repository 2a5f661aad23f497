// Store semantics, over TCP (StoreServer + connect_store) and in memory.
#include "bootstrap/store.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

/// A store under test plus whatever keeps it alive (the TCP server).
struct StoreKind {
  const char* name;
  std::function<std::shared_ptr<Store>(std::shared_ptr<void>* keep_alive)> make;
  std::function<std::shared_ptr<Store>(const std::shared_ptr<void>& keep_alive)> another_client;
};

std::shared_ptr<Store> tcp_client(const std::shared_ptr<void>& server) {
  auto port = std::static_pointer_cast<StoreServer>(server)->port();
  return connect_store("127.0.0.1", port, "secret", deadline_after(5s));
}

const StoreKind kKinds[] = {
    {"tcp",
     [](std::shared_ptr<void>* keep) {
       *keep = std::make_shared<StoreServer>("127.0.0.1", 0, "secret");
       return tcp_client(*keep);
     },
     tcp_client},
    {"memory",
     [](std::shared_ptr<void>* keep) {
       std::shared_ptr<Store> store = make_memory_store();
       *keep = store;
       return store;
     },
     [](const std::shared_ptr<void>& keep) { return std::static_pointer_cast<Store>(keep); }},
};

class StoreTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { store_ = kind().make(&keep_alive_); }
  const StoreKind& kind() const { return kKinds[GetParam()]; }
  std::shared_ptr<Store> another_client() { return kind().another_client(keep_alive_); }

  std::shared_ptr<void> keep_alive_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreTest, SetGetAddCheckErase) {
  store_->set("a", std::string("v\0w", 3));
  EXPECT_EQ(store_->get("a", deadline_after(1s)), std::string("v\0w", 3));
  store_->set("a", "");
  EXPECT_EQ(store_->get("a", deadline_after(1s)), "");
  EXPECT_EQ(store_->add("n", 5), 5);
  EXPECT_EQ(store_->add("n", -7), -2);
  EXPECT_EQ(store_->get("n", deadline_after(1s)), "-2");
  EXPECT_TRUE(store_->check({"a", "n"}));
  EXPECT_FALSE(store_->check({"a", "missing"}));
  EXPECT_TRUE(store_->check({}));
  EXPECT_TRUE(store_->erase("a"));
  EXPECT_FALSE(store_->erase("a"));
  EXPECT_FALSE(store_->check({"a"}));
  store_->wait({"n"}, deadline_after(1s));
}

TEST_P(StoreTest, AddOnTextAndOverflowAreRefusedAndTheClientStaysUsable) {
  store_->set("text", "hello");
  EXPECT_THROW(store_->add("text", 1), Error);
  store_->set("big", std::to_string(INT64_MAX));
  try {
    store_->add("big", 1);
    FAIL() << "overflow accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("big"), std::string::npos);
  }
  EXPECT_EQ(store_->add("fine", 2), 2);
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  auto writer_store = another_client();
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    writer_store->set("late", "here");
  });
  EXPECT_EQ(store_->get("late", deadline_after(5s)), "here");
  writer.join();
}

TEST_P(StoreTest, GetTimesOutNamingTheKeyAndTheStoreStaysUsable) {
  auto start = Clock::now();
  try {
    store_->get("never-set", deadline_after(150ms));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
    EXPECT_NE(std::string(e.what()).find("never-set"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 140ms);
  EXPECT_LT(Clock::now() - start, 2s);
  store_->set("after", "1");  // the reply stream is still in step
  EXPECT_EQ(store_->get("after", deadline_after(1s)), "1");
}

TEST_P(StoreTest, WaitTimesOutNamingTheMissingKeys) {
  store_->set("present", "1");
  try {
    store_->wait({"present", "absent-1", "absent-2"}, deadline_after(100ms));
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Timeout);
    std::string text = e.what();
    EXPECT_NE(text.find("absent-1"), std::string::npos) << text;
    EXPECT_NE(text.find("absent-2"), std::string::npos) << text;
    EXPECT_EQ(text.find("'present'"), std::string::npos) << text;
  }
}

TEST_P(StoreTest, WaitsAreAnsweredWhenTheirLastKeyArrivesInAnyOrder) {
  auto writer = another_client();
  auto second = another_client();
  std::thread wait_ab([&] { store_->wait({"a", "b"}, deadline_after(5s)); });
  std::thread get_b([&] { EXPECT_EQ(second->get("b", deadline_after(5s)), "2"); });
  std::this_thread::sleep_for(50ms);
  writer->set("unrelated", "0");
  writer->set("a", "1");  // the wait is answered only once b exists too
  std::this_thread::sleep_for(50ms);
  writer->add("b", 2);
  wait_ab.join();
  get_b.join();
}

TEST_P(StoreTest, ManyThreadsCountAndMeet) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto store = another_client();
      for (int i = 0; i < kAdds; ++i) store->add("counter", 1);
      store->set("rank" + std::to_string(t), std::to_string(t * t));
      std::vector<std::string> everyone;
      for (int r = 0; r < kThreads; ++r) everyone.push_back("rank" + std::to_string(r));
      store->wait(everyone, deadline_after(10s));
      for (int r = 0; r < kThreads; ++r) {
        EXPECT_EQ(store->get("rank" + std::to_string(r), deadline_after(1s)),
                  std::to_string(r * r));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(store_->add("counter", 0), kThreads * kAdds);
}

TEST_P(StoreTest, LargeValuesRoundTrip) {
  std::string value(8 << 20, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 >> 3);
  store_->set("blob", value);
  EXPECT_EQ(another_client()->get("blob", deadline_after(10s)), value);
}

TEST_P(StoreTest, PrefixStoresAreSeparateNamespaces) {
  auto a = make_prefix_store(store_, "job/a");
  auto b = make_prefix_store(store_, "job/b");
  a->set("k", "from a");
  b->set("k", "from b");
  EXPECT_EQ(a->get("k", deadline_after(1s)), "from a");
  EXPECT_EQ(b->get("k", deadline_after(1s)), "from b");
  EXPECT_EQ(store_->get("job/a/k", deadline_after(1s)), "from a");
  EXPECT_EQ(a->add("n", 3), 3);
  EXPECT_TRUE(a->check({"k", "n"}));
  EXPECT_FALSE(b->check({"n"}));
  a->wait({"k"}, deadline_after(1s));
  EXPECT_TRUE(a->erase("k"));
  EXPECT_TRUE(store_->check({"job/b/k"}));
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTest, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(kKinds[info.param].name); });

TEST(TcpStore, LimitsAreCheckedBeforeSending) {
  StoreServer server("127.0.0.1", 0, "");
  auto store = connect_store("127.0.0.1", server.port(), "", deadline_after(5s));
  EXPECT_THROW(store->set(std::string(5000, 'k'), "v"), Error);
  std::vector<std::string> many;
  for (int i = 0; i < 5000; ++i) many.push_back("k" + std::to_string(i));
  EXPECT_FALSE(store->check(many));  // split into several requests
  store->set("ok", "1");
}

/// Seconds per set + get round trip of one client, over `rounds` rounds.
double round_trip_seconds(Store& store, int rounds) {
  const auto start = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    store.set("k", std::to_string(i));
    store.get("k", deadline_after(5s));
  }
  return std::chrono::duration<double>(Clock::now() - start).count() / rounds;
}

TEST(TcpStore, ARequestCostsTheSameWhateverTheNumberOfIdleClients) {
  StoreServer server("127.0.0.1", 0, "s");
  auto store = connect_store("127.0.0.1", server.port(), "s", deadline_after(5s));
  round_trip_seconds(*store, 50);  // warm up
  // The fastest of three batches each way, alternated: a loaded machine slows some batches.
  double alone = 1e9, crowded = 1e9;
  for (int batch = 0; batch < 3; ++batch) {
    alone = std::min(alone, round_trip_seconds(*store, 200));
    std::vector<std::shared_ptr<Store>> idle;
    for (int i = 0; i < 2000; ++i) {
      idle.push_back(connect_store("127.0.0.1", server.port(), "s", deadline_after(5s)));
    }
    crowded = std::min(crowded, round_trip_seconds(*store, 200));
  }
  // A loop over every client per request (poll) made this 19-130x slower.
  EXPECT_LT(crowded, 4 * alone) << alone * 1e6 << " us alone, " << crowded * 1e6
                                << " us beside 2000 idle clients";
}

TEST(TcpStore, WrongSecretCannotJoin) {
  StoreServer server("127.0.0.1", 0, "right");
  try {
    connect_store("127.0.0.1", server.port(), "wrong", deadline_after(5s));
    FAIL() << "joined with the wrong secret";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_NE(std::string(e.what()).find("authentication failed"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, ClientStartedBeforeTheServerWaitsForIt) {
  std::uint16_t port;
  { port = StoreServer("127.0.0.1", 0, "s").port(); }
  std::unique_ptr<StoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(150ms);
    server = std::make_unique<StoreServer>("127.0.0.1", port, "s");
  });
  auto store = connect_store("127.0.0.1", port, "s", deadline_after(5s));
  starter.join();
  store->set("x", "y");
  EXPECT_EQ(store->get("x", deadline_after(1s)), "y");
}

TEST(TcpStore, ServerGoingAwayFailsPendingAndLaterCallsQuickly) {
  auto server = std::make_unique<StoreServer>("127.0.0.1", 0, "s");
  auto store = connect_store("127.0.0.1", server->port(), "s", deadline_after(5s));
  std::string where = "127.0.0.1:" + std::to_string(server->port());
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    auto start = Clock::now();
    server.reset();
    EXPECT_LT(Clock::now() - start, 1s);
  });
  auto start = Clock::now();
  try {
    store->get("never", deadline_after(30s));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
    EXPECT_EQ(std::string(e.what()), "store at " + where + " closed the connection");
  }
  EXPECT_LT(Clock::now() - start, 2s);
  stopper.join();
  try {
    store->set("k", "v");
    FAIL() << "set on a broken client";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::RemoteError);
  }
}

TEST(TcpStore, SixtyFourClientsMeetAtABarrier) {
  StoreServer server("127.0.0.1", 0, "s");
  constexpr int kClients = 64;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      auto store = connect_store("127.0.0.1", server.port(), "s", deadline_after(20s));
      if (store->add("arrived", 1) == kClients) store->set("all-here", "1");
      EXPECT_EQ(store->get("all-here", deadline_after(20s)), "1");
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace
}  // namespace chorus
