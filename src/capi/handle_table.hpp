// The C ABI's opaque handles: generation-tagged indices into slots that stay
// mapped for the life of the process, so that any value a C caller passes (a
// live handle, a destroyed or released one, garbage) is looked up, never
// dereferenced, and a handle destroyed while another thread still uses it is
// freed only when that thread is done.
//
// A handle's bits are (generation << 32) | (index + 1): never 0, so never NULL.
// A slot's state word is (generation << 32) | dead << 31 | pins, where pins counts
// the calls using the object now. Lookups take no lock: pin() adds a pin and keeps
// it only when the word still has the handle's generation and is not dead (one
// atomic add, and one subtract at the end of the call, on the object's own slot).
// retire() sets dead; whoever takes the word to (dead, 0 pins) -- retire itself, or
// the last unpin -- deletes the object and gives the slot a new generation, so the
// stale handle stays invalid when the slot is reused (until the 32-bit generation
// wraps, after 2^32 reuses of one slot). Creating and freeing take a mutex.
#pragma once

#include <chorus/error.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace chorus::capi {

static_assert(sizeof(std::uintptr_t) == 8, "a handle carries its generation above its index");

/// What a handle value turned out to be.
enum class HandleState { Live, Null, Stale, Unknown };

template <typename Object, typename Handle>
class HandleTable {
 private:
  struct Slot {
    std::atomic<std::uint64_t> state{0};
    std::atomic<Object*> object{nullptr};
    std::uint32_t index = 0;      ///< its own index
    std::uint32_t next_free = 0;  ///< under mutex_, while free: the next free slot's index + 1
  };

 public:
  /// Slots per chunk, and chunks at most: a process holds up to 4M live handles of a kind.
  static constexpr std::uint32_t kChunkSlots = 1024;
  static constexpr std::uint32_t kMaxChunks = 4096;

  constexpr HandleTable() = default;
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  /// Owns `object` from now on and returns its new handle. Throws std::bad_alloc, or
  /// Error(SystemError) when every slot is live.
  Handle create(std::unique_ptr<Object> object) {
    std::lock_guard lock(mutex_);
    const std::uint32_t index = take_index();
    Slot& slot = slot_at(index);
    slot.object.store(object.release(), std::memory_order_relaxed);
    const std::uint64_t generation = slot.state.load(std::memory_order_relaxed) >> 32;
    return reinterpret_cast<Handle>(static_cast<std::uintptr_t>(generation << 32 | (index + 1)));
  }

  /// A use of the object behind a handle: holds one pin while it lives.
  class Pin {
   public:
    Pin(HandleTable& table, Handle handle) noexcept : table_(table) {
      state_ = table.pin(handle, &slot_);
    }
    ~Pin() {
      if (state_ == HandleState::Live) table_.unpin(*slot_);
    }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

    HandleState state() const { return state_; }
    explicit operator bool() const { return state_ == HandleState::Live; }
    Object* operator->() const { return slot_->object.load(std::memory_order_relaxed); }
    Object& operator*() const { return *operator->(); }
    /// Marks the handle destroyed (the object goes when the last pin does, this one
    /// included). False when another thread retired it first.
    bool retire() noexcept { return table_.retire(*slot_); }

   private:
    HandleTable& table_;
    HandleState state_ = HandleState::Unknown;
    Slot* slot_ = nullptr;
  };

 private:
  static constexpr std::uint64_t kDead = std::uint64_t{1} << 31;
  static constexpr std::uint64_t kPins = kDead - 1;

  Slot& slot_at(std::uint32_t index) const {
    return chunks_[index / kChunkSlots].load(std::memory_order_acquire)[index % kChunkSlots];
  }

  /// Under mutex_: a freed slot, else the next never-used one (mapping its chunk).
  std::uint32_t take_index() {
    if (free_head_ != 0) {
      const std::uint32_t index = free_head_ - 1;
      free_head_ = slot_at(index).next_free;
      return index;
    }
    if (used_ == kChunkSlots * kMaxChunks) {
      throw Error(Status::SystemError,
                  "too many live handles (" + std::to_string(used_) + ") of one kind");
    }
    if (used_ % kChunkSlots == 0) {
      Slot* chunk = new Slot[kChunkSlots];
      for (std::uint32_t i = 0; i < kChunkSlots; ++i) chunk[i].index = used_ + i;
      chunks_[used_ / kChunkSlots].store(chunk, std::memory_order_release);
    }
    return used_++;
  }

  HandleState pin(Handle handle, Slot** out) noexcept {
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle));
    if (bits == 0) return HandleState::Null;
    const std::uint64_t index = (bits & 0xffffffffu) - 1;
    if (index >= kChunkSlots * std::uint64_t{kMaxChunks}) return HandleState::Unknown;
    Slot* chunk = chunks_[index / kChunkSlots].load(std::memory_order_acquire);
    if (chunk == nullptr) return HandleState::Unknown;
    Slot& slot = chunk[index % kChunkSlots];
    const std::uint64_t old = slot.state.fetch_add(1, std::memory_order_acquire);
    // A slot never handed out, or freed and not yet reused, holds no object.
    const bool held = slot.object.load(std::memory_order_relaxed) != nullptr;
    if (old >> 32 == bits >> 32 && (old & kDead) == 0 && held) {
      *out = &slot;
      return HandleState::Live;
    }
    unpin(slot);
    return old >> 32 == bits >> 32 && !held ? HandleState::Unknown : HandleState::Stale;
  }

  void unpin(Slot& slot) noexcept {
    const std::uint64_t old = slot.state.fetch_sub(1, std::memory_order_acq_rel);
    if ((old & kDead) != 0 && (old & kPins) == 1) free_slot(slot, old >> 32);
  }

  bool retire(Slot& slot) noexcept {
    const std::uint64_t old = slot.state.fetch_or(kDead, std::memory_order_acq_rel);
    if ((old & kDead) != 0) return false;
    if ((old & kPins) == 0) free_slot(slot, old >> 32);
    return true;
  }

  /// The slot of `generation` was seen dead with no pins: gives it the next generation
  /// (keeping the transient pins of stale lookups), deletes its object and returns it to the
  /// free list. Two callers may get here for one death (retire saw no pins, then a stale
  /// lookup's transient pin came and went): only the one whose generation bump succeeds
  /// frees. Nothing here allocates, and the table's members are trivially destructible, so a
  /// handle destroyed during the process's exit still finds the table intact.
  void free_slot(Slot& slot, std::uint64_t generation) noexcept {
    std::uint64_t old = slot.state.load(std::memory_order_relaxed);
    do {
      if (old >> 32 != generation || (old & kDead) == 0) return;  // freed by the other caller
    } while (!slot.state.compare_exchange_weak(old, (generation + 1) << 32 | (old & kPins),
                                               std::memory_order_acq_rel));
    delete slot.object.exchange(nullptr, std::memory_order_acquire);
    std::lock_guard lock(mutex_);
    slot.next_free = free_head_;
    free_head_ = slot.index + 1;
  }

  std::atomic<Slot*> chunks_[kMaxChunks] = {};  ///< mapped on first use, never unmapped
  std::mutex mutex_;
  std::uint32_t free_head_ = 0;  ///< the first free slot's index + 1 (0: none)
  std::uint32_t used_ = 0;       ///< slots handed out at least once
};

}  // namespace chorus::capi
