// A CPU allocator that counts the bytes torch holds: installed through c10::SetCPUAllocator
// in front of the allocator that was there, it forwards every allocation and keeps the bytes
// alive now and their peak, and can refuse allocations past a limit. One per process; install
// it before the first tensor. unseen_state_bytes() adds what the peak cannot see of a model's
// states: the parameters and gradient buffers held before the peak restarted, and gradient
// buckets in host-shared memory, which torch's allocator never hands out.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

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
  void reset_peak() {
    std::lock_guard lock(mutex_);
    ++generation_;
    peak_.store(current(), std::memory_order_relaxed);
  }
  /// Whether `data` starts an allocation made through this allocator since the last
  /// reset_peak() and still held (whose bytes the peak since then has counted).
  bool counted_since_reset(const void* data) const {
    std::lock_guard lock(mutex_);
    const auto it = sizes_.find(const_cast<void*>(data));
    return it != sizes_.end() && it->second.second == generation_;
  }
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
      sizes_[data] = {bytes, generation_};
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
        bytes = it->second.first;
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
  /// Each held allocation's bytes and the reset_peak() generation it was made in.
  mutable std::unordered_map<void*, std::pair<std::size_t, std::uint64_t>> sizes_;
  std::uint64_t generation_ = 0;  ///< guarded by mutex_
  mutable std::atomic<std::int64_t> current_{0};
  mutable std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> limit_{0};
};

inline CountingAllocator* CountingAllocator::self = nullptr;

/// The bytes of a model's states that `counter`'s peak since its last reset_peak() did not
/// count: every parameter whose storage was allocated before it (all of them, as a rule), and
/// each distinct storage of the parameters' gradients (whole: a gradient reducer's bucket once)
/// allocated before it (ordinary buckets) or not through torch's CPU allocator at all
/// (host-shared buckets). Gradients allocated since, by autograd, are in the peak already.
inline std::int64_t unseen_state_bytes(const std::vector<at::Tensor>& parameters,
                                       const CountingAllocator& counter) {
  std::int64_t bytes = 0;
  std::unordered_set<const void*> storages;
  for (const at::Tensor& p : parameters) {
    if (!counter.counted_since_reset(p.storage().data_ptr().get()))
      bytes += static_cast<std::int64_t>(p.nbytes());
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    const void* data = grad.storage().data_ptr().get();
    if (data != nullptr && storages.insert(data).second && !counter.counted_since_reset(data))
      bytes += static_cast<std::int64_t>(grad.storage().nbytes());
  }
  return bytes;
}

}  // namespace chorus::bench
