// Cross-memory reads: copying bytes straight out of another process of this host
// (process_vm_readv), so that a byte crosses once. The single-copy algorithms
// (algorithms/cma.hpp) publish their buffers' addresses in the host arena and read
// each other's buffers through this class.
//
// The kernel allows a read where the reader may ptrace the owner (same uid or
// CAP_SYS_PTRACE, YAMA ptrace_scope, the owner dumpable) and no seccomp filter
// forbids the call; callers probe() every peer before relying on it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::transport {

class CrossMemory {
 public:
  /// Records this process's pid: construct it in the process that reads (after any fork).
  CrossMemory();

  /// This process's pid, under which its peers read from it.
  pid_t self() const { return self_; }

  /// Copies `bytes` bytes at `address` of process `pid` to `dst`; the own pid (threads as
  /// ranks, one address space) is a plain copy. A short read (a range crossing into unmapped
  /// memory) continues where it stopped, so a failure is that page's. Returns 0, or the errno
  /// of the failing read (EFAULT when the kernel copied nothing).
  int read(pid_t pid, std::uint64_t address, void* dst, std::size_t bytes) const;

  /// Whether the 8-byte word at `address` of `pid` reads as `expected`; when not, `*why` says
  /// why (the errno's text, or "wrong probe value"). The own pid is readable without a read.
  bool probe(pid_t pid, std::uint64_t address, std::uint64_t expected, std::string* why) const;

  /// After a read of `pid` failed with `error`: whether `pid` is gone, or goes within
  /// kExitGrace. A process being killed may fail reads with EFAULT (its memory is torn down)
  /// before it is reported gone.
  static bool failed_by_exit(pid_t pid, int error);
  static constexpr std::chrono::milliseconds kExitGrace{200};

 private:
  pid_t self_;
};

}  // namespace chorus::transport
