// A POSIX shared-memory segment (shm_open + mmap), unmapped on destruction.
// The creator unlinks the name as soon as every user has mapped it (unlink()),
// or at the latest in its destructor, so nothing is left in /dev/shm.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace chorus::transport {

class Segment {
 public:
  /// Creates a new segment of `bytes` zero bytes, every page allocated (fails if
  /// the name exists or /dev/shm has no room).
  static std::shared_ptr<Segment> create(const std::string& name, std::size_t bytes);
  /// Maps an existing segment, which must be exactly `bytes` long. Both map with
  /// the page tables filled in.
  static std::shared_ptr<Segment> open(const std::string& name, std::size_t bytes);

  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  /// Removes the name (the mapping stays valid). Idempotent; creator only.
  void unlink() noexcept;

  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, std::byte* base, std::size_t size, bool owner)
      : name_(std::move(name)), base_(base), size_(size), linked_(owner) {}

  std::string name_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  bool linked_ = false;  ///< true while this (creating) object still owns the name
};

}  // namespace chorus::transport
