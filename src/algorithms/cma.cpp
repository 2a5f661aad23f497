// CmaCall: the cards, the agreement on availability and the reads (cma.hpp).
#include "algorithms/cma.hpp"

#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "core/log.hpp"
#include "transport/arena/host_arena.hpp"

#include <chorus/error.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace chorus::algorithms {
namespace {

using transport::CrossMemory;
using transport::HostArena;

constexpr std::uint64_t kReadable = 1;
constexpr std::uint64_t kUnreadable = 2;
constexpr std::size_t kVerdictOffset = 64;  ///< own cache line, written after the card is read

static_assert(sizeof(CmaCall::Card) == 64);

/// What this process learnt per arena: the pids' hash and the verdict. An arena
/// freed and another allocated at its address may inherit an entry; its cards then
/// carry other pids (or some rank has no entry), so the ranks probe again.
struct Known {
  std::uint64_t pids = 0;
  std::uint64_t verdict = 0;
};

std::mutex known_mutex;
std::map<const HostArena*, Known> known_arenas;

Known known_of(const HostArena& arena) {
  std::lock_guard lock(known_mutex);
  auto it = known_arenas.find(&arena);
  return it == known_arenas.end() ? Known{} : it->second;
}

void remember(const HostArena& arena, Known known) {
  std::lock_guard lock(known_mutex);
  known_arenas[&arena] = known;
}

/// FNV-1a over the pids in rank order; never 0 ("no entry").
std::uint64_t hash_pids(const std::vector<CmaCall::Card>& cards) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& card : cards) {
    for (int shift = 0; shift < 64; shift += 8) {
      h = (h ^ ((card.pid >> shift) & 0xff)) * 0x100000001b3ull;
    }
  }
  return h == 0 ? 1 : h;
}

}  // namespace

void read_every_block(CmaCall& call, const Call& args) {
  const int n = call.arena().size();
  const int r = call.arena().rank();
  copy_elements(element_at(args.recv, r * args.count, args.dtype), args.send, args.count,
                args.dtype);
  const std::size_t block = bytes_of(args.count, args.dtype);
  for (int step = 1; step < n; ++step) {
    const int p = (r + step) % n;
    call.read_send(p, 0, element_at(args.recv, p * args.count, args.dtype), block);
  }
}

std::byte* cma_scratch(std::size_t bytes) {
  thread_local std::unique_ptr<std::max_align_t[]> buffer;
  thread_local std::size_t capacity = 0;
  if (capacity < bytes) {
    const std::size_t units = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
    buffer = std::make_unique_for_overwrite<std::max_align_t[]>(units);
    capacity = units * sizeof(std::max_align_t);
  }
  return reinterpret_cast<std::byte*>(buffer.get());
}

CmaCall::CmaCall(const Call& args, const Context& ctx)
    : ctx_(ctx), args_(args), arena_(begin_arena_call(args, ctx)) {
  round_ = arena_.begin_round(ctx.deadline);
  publish_card();
  arena_.post(2 * round_);
  arena_.wait_all(2 * round_, ctx.deadline);
  cards_.resize(static_cast<std::size_t>(arena_.size()));
  for (int r = 0; r < arena_.size(); ++r) {
    std::memcpy(&cards_[static_cast<std::size_t>(r)], arena_.buffer(r, round_), sizeof(Card));
  }
  usable_ = agree();
}

void CmaCall::publish_card() {
  const Known known = known_of(arena_);
  const auto self = static_cast<std::uint64_t>(memory_.self());
  probe_word_ = 0x43484f5255530000ull ^ (self << 20) ^ round_;
  Card card{};
  card.pid = self;
  card.send = reinterpret_cast<std::uint64_t>(args_.send);
  card.recv = reinterpret_cast<std::uint64_t>(args_.recv);
  card.probe_address = reinterpret_cast<std::uint64_t>(&probe_word_);
  card.probe_value = probe_word_;
  card.known_pids = known.pids;
  card.known_verdict = known.verdict;
  std::memcpy(arena_.buffer(arena_.rank(), round_), &card, sizeof(card));
}

/// Every rank evaluates the same cards, so every rank takes the same branch.
bool CmaCall::agree() {
  const std::uint64_t pids = hash_pids(cards_);
  const std::uint64_t verdict = cards_[0].known_verdict;
  bool all_known = verdict != 0;
  for (const Card& card : cards_) {
    all_known = all_known && card.known_pids == pids && card.known_verdict == verdict;
  }
  if (all_known) return verdict == kReadable;
  const std::uint64_t mine = probe_peers() ? kReadable : kUnreadable;
  std::memcpy(arena_.buffer(arena_.rank(), round_) + kVerdictOffset, &mine, sizeof(mine));
  arena_.post(2 * round_ + 1);
  arena_.wait_all(2 * round_ + 1, ctx_.deadline);
  bool readable = true;
  for (int r = 0; r < arena_.size(); ++r) {
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, arena_.buffer(r, round_) + kVerdictOffset, sizeof(theirs));
    readable = readable && theirs == kReadable;
  }
  remember(arena_, {pids, readable ? kReadable : kUnreadable});
  if (!readable && arena_.rank() == 0) {
    log(LogLevel::Warn,
        "cma: some rank cannot read its peers' memory (cross-memory reads are "
        "forbidden); the cma algorithms run as shm_direct on this communicator");
  }
  return readable;
}

/// Reads every peer's probe word; false (and the reason at INFO) on the first failure.
bool CmaCall::probe_peers() {
  for (int p = 0; p < arena_.size(); ++p) {
    const Card& card = cards_[static_cast<std::size_t>(p)];
    std::string why;
    if (p == arena_.rank() ||
        memory_.probe(static_cast<pid_t>(card.pid), card.probe_address, card.probe_value, &why))
      continue;
    log(LogLevel::Info, "cma: rank " + std::to_string(arena_.rank()) + " cannot read rank " +
                            std::to_string(p) + "'s memory: " + why);
    return false;
  }
  return true;
}

void CmaCall::read_send(int peer, std::size_t offset, void* dst, std::size_t bytes) {
  read(peer, cards_[static_cast<std::size_t>(peer)].send, offset, dst, bytes);
}

void CmaCall::read_recv(int peer, std::size_t offset, void* dst, std::size_t bytes) {
  read(peer, cards_[static_cast<std::size_t>(peer)].recv, offset, dst, bytes);
}

void CmaCall::read(int peer, std::uint64_t base, std::size_t offset, void* dst, std::size_t bytes) {
  const auto pid = static_cast<pid_t>(cards_[static_cast<std::size_t>(peer)].pid);
  const int error = memory_.read(pid, base + offset, dst, bytes);
  if (error != 0) fail_read(peer, error, bytes);
}

void CmaCall::fail_read(int peer, int error, std::size_t bytes) {
  const std::string who = "rank " + std::to_string(peer) + " (pid " +
                          std::to_string(cards_[static_cast<std::size_t>(peer)].pid) + ")";
  const std::string call = std::string(to_string(args_.collective)) + " (cma): ";
  const auto pid = static_cast<pid_t>(cards_[static_cast<std::size_t>(peer)].pid);
  const bool gone = CrossMemory::failed_by_exit(pid, error);
  // A peer whose memory went away may have left because of an earlier failure elsewhere
  // (it aborted the job, naming the rank that died first): report that one if it is known.
  arena_.check_now();
  const std::string message =
      gone ? call + who + " died (cross-memory read: " + std::strerror(error) + ")"
           : call + "reading " + std::to_string(bytes) + " bytes of " + who +
                 " failed (cross-memory read: " + std::strerror(error) + ")";
  const Status status = gone ? Status::RemoteError : Status::SystemError;
  ctx_.transport.abort(status, message);
  throw Error(status, message);
}

}  // namespace chorus::algorithms
