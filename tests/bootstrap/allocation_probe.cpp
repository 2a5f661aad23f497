// Global operator new/delete over malloc/free that record the largest request
// (kept in its own file so that no call site sees both the new and the free).
#include "allocation_probe.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<std::size_t> g_largest{0};
}  // namespace

namespace chorus::testing {
void reset_largest_allocation() { g_largest.store(0); }
std::size_t largest_allocation() { return g_largest.load(); }
}  // namespace chorus::testing

void* operator new(std::size_t bytes) {
  std::size_t seen = g_largest.load(std::memory_order_relaxed);
  while (bytes > seen && !g_largest.compare_exchange_weak(seen, bytes)) {
  }
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) { return ::operator new(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
