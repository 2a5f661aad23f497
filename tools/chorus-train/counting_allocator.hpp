// A CPU allocator that counts the bytes torch holds: installed through c10::SetCPUAllocator
// in front of the allocator that was there, it forwards every allocation and keeps the bytes
// alive now and their peak, and can refuse allocations past a limit. One per process; install
// it before the first tensor.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace chorus::bench {

class CountingAllocator final : public c10::Allocator {
 public:
  /// Wraps the current CPU allocator and installs itself in its place.
  static CountingAllocator& install() {
    static CountingAllocator instance(c10::GetCPUAllocator());
    self = &instance;
    c10::SetCPUAllocator(&instance, /*priority=*/100);
    return instance;
  }

  std::int64_t current() const { return current_.load(std::memory_order_relaxed); }
  std::int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  /// Restarts the peak at the bytes held now.
  void reset_peak() { peak_.store(current(), std::memory_order_relaxed); }
  /// From now on an allocation that would raise the bytes held above `bytes` fails with a
  /// c10::Error starting "counting allocator: over the limit"; 0: no limit.
  void set_limit(std::int64_t bytes) { limit_.store(bytes, std::memory_order_relaxed); }

  c10::DataPtr allocate(std::size_t bytes) const override {
    const std::int64_t limit = limit_.load(std::memory_order_relaxed);
    const std::int64_t after = current() + static_cast<std::int64_t>(bytes);
    TORCH_CHECK(limit == 0 || after <= limit, "counting allocator: over the limit: ", bytes,
                " bytes more would hold ", after, " bytes, the limit is ", limit);
    c10::DataPtr inner = base_->allocate(bytes);
    void* data = inner.get();
    // Kernels free their scratch through raw_deleter(), so the context is the pointer itself
    // and the sizes live beside it.
    TORCH_CHECK(data == inner.get_context() && inner.get_deleter() == base_deleter_,
                "counting allocator: the wrapped CPU allocator is not a raw allocator");
    inner.release_context();
    {
      std::lock_guard lock(mutex_);
      sizes_[data] = bytes;
    }
    add(static_cast<std::int64_t>(bytes));
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  explicit CountingAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {
    TORCH_CHECK(base_deleter_ != nullptr,
                "counting allocator: the CPU allocator has no raw deleter");
  }

  static CountingAllocator* self;

  static void release(void* data) {
    if (data == nullptr) return;
    std::size_t bytes = 0;
    {
      std::lock_guard lock(self->mutex_);
      auto it = self->sizes_.find(data);
      if (it != self->sizes_.end()) {
        bytes = it->second;
        self->sizes_.erase(it);
      }
    }
    self->add(-static_cast<std::int64_t>(bytes));
    self->base_deleter_(data);
  }

  void add(std::int64_t bytes) const {
    const std::int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t seen = peak_.load(std::memory_order_relaxed);
    while (now > seen && !peak_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, std::size_t> sizes_;
  mutable std::atomic<std::int64_t> current_{0};
  mutable std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> limit_{0};
};

inline CountingAllocator* CountingAllocator::self = nullptr;

}  // namespace chorus::bench
