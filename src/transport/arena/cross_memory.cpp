// Cross-memory reads; see cross_memory.hpp.
#include "transport/arena/cross_memory.hpp"

#include "core/copy.hpp"
#include "transport/shm/process_state.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace chorus::transport {
namespace {

/// One process_vm_readv of up to `bytes`; returns the bytes read or -1 (errno set).
ssize_t read_once(pid_t pid, void* dst, std::uint64_t address, std::size_t bytes) {
  iovec local{dst, bytes};
  iovec remote{reinterpret_cast<void*>(address), bytes};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

}  // namespace

CrossMemory::CrossMemory() : self_(::getpid()) {}

int CrossMemory::read(pid_t pid, std::uint64_t address, void* dst, std::size_t bytes) const {
  if (bytes == 0) return 0;
  if (pid == self_) {
    copy_bytes(dst, reinterpret_cast<const void*>(address), bytes);
    return 0;
  }
  auto* out = static_cast<std::byte*>(dst);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = read_once(pid, out + done, address + done, bytes - done);
    if (got <= 0) return got < 0 ? errno : EFAULT;
    done += static_cast<std::size_t>(got);
  }
  return 0;
}

bool CrossMemory::probe(pid_t pid, std::uint64_t address, std::uint64_t expected,
                        std::string* why) const {
  if (pid == self_) return true;
  std::uint64_t value = 0;
  const ssize_t got = read_once(pid, &value, address, sizeof(value));
  if (got == static_cast<ssize_t>(sizeof(value)) && value == expected) return true;
  *why = got < 0 ? std::strerror(errno) : "wrong probe value";
  return false;
}

bool CrossMemory::failed_by_exit(pid_t pid, int error) {
  if (error == ESRCH) return true;
  constexpr auto kStep = std::chrono::milliseconds(5);
  for (auto waited = std::chrono::milliseconds(0); waited < kExitGrace; waited += kStep) {
    if (!shm::process_alive(pid)) return true;
    std::this_thread::sleep_for(kStep);
  }
  return false;
}

}  // namespace chorus::transport
