// The C ABI's handle table (src/capi/handle_table.hpp) on its own: lookups of live, NULL,
// destroyed and made-up handles, slot reuse under a new generation, and a destroy racing
// lookups of the same handle from another thread (the object is deleted once, and the slot
// is handed out once).
#include "capi/handle_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace chorus::capi {
namespace {

struct Object {
  explicit Object(std::atomic<int>* deleted) : deleted(deleted) {}
  ~Object() { deleted->fetch_add(1); }
  std::atomic<int>* deleted;
};
struct OpaqueHandle;
using Table = HandleTable<Object, OpaqueHandle*>;

HandleState state_of(Table& table, OpaqueHandle* handle) {
  return Table::Pin(table, handle).state();
}

TEST(HandleTable, LiveNullDestroyedAndMadeUpHandles) {
  static Table table;
  std::atomic<int> deleted{0};
  OpaqueHandle* handle = table.create(std::make_unique<Object>(&deleted));
  EXPECT_EQ(state_of(table, handle), HandleState::Live);
  EXPECT_EQ(state_of(table, nullptr), HandleState::Null);
  EXPECT_EQ(state_of(table, reinterpret_cast<OpaqueHandle*>(std::uintptr_t{0xdeadbeef00})),
            HandleState::Unknown);
  {
    Table::Pin pin(table, handle);
    ASSERT_TRUE(pin);
    EXPECT_TRUE(pin.retire());
    EXPECT_FALSE(pin.retire());    // destroyed twice
    EXPECT_EQ(deleted.load(), 0);  // this pin still uses it
  }
  EXPECT_EQ(deleted.load(), 1);
  EXPECT_EQ(state_of(table, handle), HandleState::Stale);
  // The slot is reused under a new generation: the old handle stays destroyed.
  OpaqueHandle* reused = table.create(std::make_unique<Object>(&deleted));
  EXPECT_NE(reused, handle);
  EXPECT_EQ(state_of(table, handle), HandleState::Stale);
  EXPECT_EQ(state_of(table, reused), HandleState::Live);
  Table::Pin(table, reused).retire();
  EXPECT_EQ(deleted.load(), 2);
}

// A thread looks a handle up over and over while another destroys it: whichever of them
// frees the slot, the object is deleted once and the slot returns to the free list once, so
// the next handles created are distinct and live.
TEST(HandleTable, DestroyRacingLookupsFreesOnce) {
  static Table table;
  std::atomic<int> deleted{0};
  constexpr int kRounds = 3000;
  for (int round = 0; round < kRounds; ++round) {
    OpaqueHandle* handle = table.create(std::make_unique<Object>(&deleted));
    std::atomic<bool> go{false};
    std::thread looker([&] {
      while (!go.load()) std::this_thread::yield();
      while (state_of(table, handle) == HandleState::Live) {
      }
      for (int i = 0; i < 16; ++i) (void)state_of(table, handle);
    });
    go.store(true);
    Table::Pin(table, handle).retire();
    looker.join();
    ASSERT_EQ(deleted.load(), round + 1) << "round " << round;
  }
  std::vector<OpaqueHandle*> handles;
  std::set<OpaqueHandle*> distinct;
  for (int i = 0; i < 64; ++i) {
    handles.push_back(table.create(std::make_unique<Object>(&deleted)));
    distinct.insert(handles.back());
  }
  EXPECT_EQ(distinct.size(), handles.size());
  for (OpaqueHandle* handle : handles) {
    Table::Pin pin(table, handle);
    ASSERT_TRUE(pin);
    pin.retire();
  }
  EXPECT_EQ(deleted.load(), kRounds + 64);
}

}  // namespace
}  // namespace chorus::capi
