// The host arena; see host_arena.hpp.
#include "transport/arena/host_arena.hpp"

#include "bootstrap/store_exchange.hpp"
#include "core/env.hpp"
#include "transport/shm_budget.hpp"
#include "transport/stall_probe.hpp"
#include "transport/timeout_sentence.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;

static_assert(kLanes == shm_budget::kLanesPerRank);
constexpr std::size_t kMinSlotBytes = std::size_t{4} << 10;
constexpr std::size_t kMaxSlotBytes = std::size_t{1} << 30;
/// Watcher passes while waiting: every millisecond, or every 20 us per rank when that is
/// longer (a pass looks at every peer's link, so ranks that wake once per call would
/// otherwise spend most of a many-rank call in the watcher).
Clock::duration check_period(int size) {
  return std::max<Clock::duration>(1ms, std::chrono::microseconds(20) * size);
}
constexpr int kMaxSleepMs = 5;  ///< longest futex sleep
/// Polls a wait makes before it first reads the clock (a peer a few hundred nanoseconds
/// behind posts within them; a clock read costs as much as several polls here).
constexpr int kQuickPolls = 32;

std::string ready_key() { return "transport/arena/ready"; }
std::string mapped_key() { return "transport/arena/mapped"; }

std::size_t parse_slot_bytes(const std::string& text, const std::string& what) {
  std::size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < kMinSlotBytes ||
      value > kMaxSlotBytes) {
    throw Error(Status::InvalidArgument,
                what + " is \"" + text + "\"; expected bytes from 4096 to 1073741824");
  }
  return value / 128 * 128;  // two halves, each a whole number of cache lines
}

/// The flag lines, the arena's doorbell, then each rank's own (posted_bell).
std::size_t header_bytes(int size) {
  return sizeof(FlagLine) * static_cast<std::size_t>(size) +
         sizeof(DoorbellWord) * (static_cast<std::size_t>(size) + 1);
}

/// One rank's part after the header: its halves, then its lanes.
std::size_t stride_bytes(std::size_t slot_bytes, std::size_t lane_bytes) {
  return slot_bytes + lane_bytes * kLanes;
}

std::size_t segment_bytes(int size, std::size_t stride) {
  return header_bytes(size) + stride * static_cast<std::size_t>(size);
}

Fingerprint unpack(std::uint64_t seq, std::uint64_t count, std::uint64_t shape) {
  Fingerprint call;
  call.seq = seq;
  call.count = count;
  call.root = static_cast<std::int32_t>(shape >> 32);
  call.collective = static_cast<Collective>((shape >> 16) & 0xff);
  call.dtype = static_cast<std::uint8_t>((shape >> 8) & 0xff);
  call.op = static_cast<std::uint8_t>(shape & 0xff);
  return call;
}

}  // namespace

std::size_t HostArena::slot_bytes_for(int host_ranks) {
  std::string text = env_or("CHORUS_SHM_ARENA_BYTES", "");
  if (text.empty()) return shm_budget::arena_slot_bytes(host_ranks);
  return parse_slot_bytes(text, "CHORUS_SHM_ARENA_BYTES");
}

std::unique_ptr<HostArena> HostArena::connect(Store& store, int rank, int size,
                                              const std::string& token, Deadline deadline,
                                              int sized_for) {
  std::shared_ptr<Segment> segment;
  std::size_t slot_bytes = 0;
  const int host_ranks = std::max(size, sized_for);
  const auto lane_bytes = static_cast<std::size_t>(shm_budget::arena_lane_bytes(host_ranks));
  if (rank == 0) {
    // A round must hold one 8-byte element per rank (reduce-scatter, scatter, all-to-all).
    slot_bytes = std::max(slot_bytes_for(host_ranks), 128 * static_cast<std::size_t>(size));
    segment = Segment::create("chorus-" + token + "-arena",
                              segment_bytes(size, stride_bytes(slot_bytes, lane_bytes)),
                              /*map_whole=*/false);
    store.set(ready_key(), SegmentNotice{std::to_string(slot_bytes), segment->locator()}.text());
  } else {
    const SegmentNotice notice = SegmentNotice::parse(store.get(ready_key(), deadline));
    slot_bytes = parse_slot_bytes(notice.field, "the arena slot size");
    segment = Segment::open(notice.locator,
                            segment_bytes(size, stride_bytes(slot_bytes, lane_bytes)), deadline);
  }
  // This rank's flag line, the doorbells it rings and its slot; the peers' parts fault in
  // when read.
  const auto n = static_cast<std::size_t>(size);
  const auto r = static_cast<std::size_t>(rank);
  segment->populate(sizeof(FlagLine) * r, sizeof(FlagLine));
  segment->populate(sizeof(FlagLine) * n, sizeof(DoorbellWord));
  segment->populate(sizeof(FlagLine) * n + sizeof(DoorbellWord) * (r + 1), sizeof(DoorbellWord));
  const std::size_t stride = stride_bytes(slot_bytes, lane_bytes);
  segment->populate(header_bytes(size) + stride * r, stride);
  store_barrier(store, mapped_key(), size, deadline);
  if (rank == 0) segment->withdraw();
  return std::unique_ptr<HostArena>(
      new HostArena(std::move(segment), rank, size, slot_bytes, lane_bytes));
}

HostArena::HostArena(std::shared_ptr<Segment> segment, int rank, int size, std::size_t slot_bytes,
                     std::size_t lane_bytes)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      slot_bytes_(slot_bytes),
      check_period_(check_period(size)),
      stride_(stride_bytes(slot_bytes, lane_bytes)),
      half_bytes_(slot_bytes / 2),
      lane_bytes_(lane_bytes) {
  std::byte* base = segment_->base();
  seen_.assign(static_cast<std::size_t>(size), 0);
  checked_.assign(static_cast<std::size_t>(size), 0);
  bells_ = reinterpret_cast<DoorbellWord*>(base + sizeof(FlagLine) * size);
  doorbell_ = Doorbell(bells_);
  slots_ = base + header_bytes(size);
  lines_ = reinterpret_cast<FlagLine*>(base);
}

void HostArena::call_check(const Fingerprint& call, Clock::time_point now) {
  next_call_check_ = now + check_period_;
  watcher_->arena_check(call, /*send_probe=*/false);
}

bool HostArena::ready(int r, std::uint64_t value) {
  if (!reached(r, value)) return false;
  if (checked_[static_cast<std::size_t>(r)] != value / 2) check_round_of(r, value / 2);
  return true;
}

void HostArena::fail_round_check(int r, std::uint64_t round, const RecordRead& read) {
  if (read.before != round || read.after != round) {
    fail(Error(Status::InternalError, "host arena: rank " + std::to_string(r) +
                                          " rewrote its record of round " + std::to_string(round) +
                                          " while rank " + std::to_string(rank_) + " read it (" +
                                          describe(call_) + ")"));
  }
  const Fingerprint& mine = round_calls_[round % kLanes];
  const Fingerprint theirs = unpack(read.seq, read.count, read.shape);
  fail(Error(Status::Mismatch, "rank " + std::to_string(rank_) + " is in " + describe(mine) +
                                   " but rank " + std::to_string(r) + " is in " +
                                   describe(theirs)));
}

void HostArena::fail(const Error& error) {
  if (watcher_) watcher_->arena_fail(error);
  throw error;
}

/// Spin, then yield, then sleep on the doorbell (wait_policy_); the watcher runs every
/// check_period_.
void HostArena::wait_slow(int r, std::uint64_t value, Deadline deadline) {
  wait_until([&] { return reached(r, value); }, value, std::span<const int>(&r, 1), deadline);
}

void HostArena::wait_any(std::span<const int> ranks, std::uint64_t value, Deadline deadline) {
  const auto any = [&] {
    for (int r : ranks) {
      if (reached(r, value)) return true;
    }
    return false;
  };
  wait_until(any, value, ranks, deadline);
}

std::optional<Fingerprint> HostArena::newest_call_of(int r) const {
  std::uint64_t newest = 0;
  std::optional<Fingerprint> call;
  for (const RecordLine& line_of_round : line(r).rounds) {
    const RoundRecord& record = line_of_round.record;
    const std::uint64_t before = record.round.load(std::memory_order_acquire);
    if (before <= newest) continue;  // older, or 0: never written or being rewritten
    const std::uint64_t seq = record.seq.load(std::memory_order_acquire);
    const std::uint64_t count = record.count.load(std::memory_order_acquire);
    const std::uint64_t shape = record.shape.load(std::memory_order_acquire);
    if (record.round.load(std::memory_order_relaxed) != before) continue;  // torn
    newest = before;
    call = unpack(seq, count, shape);
  }
  return call;
}

void HostArena::fail_timeout(std::span<const int> awaited, std::uint64_t value,
                             Clock::duration waited) {
  std::vector<std::optional<Fingerprint>> seen(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) seen[static_cast<std::size_t>(r)] = newest_call_of(r);
  }
  if (watcher_) merge_sightings(seen, watcher_->arena_sightings());
  std::string ranks;
  for (int r : awaited) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const std::string what = (value % 2 ? "second phase of round " : "round ") +
                           std::to_string(value / 2) + " in the host arena";
  fail(Error(Status::Timeout,
             timeout_sentence({rank_, call_, waited, ranks, what, std::move(seen)})));
}

template <typename Reached>
void HostArena::wait_until(Reached&& reached, std::uint64_t value, std::span<const int> awaited,
                           Deadline deadline) {
  if (wait_policy_.spin.count() > 0) {  // ranks that share cores yield at once instead
    for (int i = 0; i < kQuickPolls; ++i) {
      cpu_relax();
      if (reached()) return;
    }
  }
  const auto start = Clock::now();
  auto next_check = start;
  auto next_probe = start + kStallProbeDelay;
  const Backoff backoff(wait_policy_, start);
  while (!reached()) {
    const auto now = Clock::now();
    if (now >= next_check) {
      const bool probe = now >= next_probe;
      if (probe) next_probe = now + kStallProbeRepeat;
      std::optional<Error> lost;
      if (watcher_) {
        watcher_->arena_check(call_, probe);
        for (int r : awaited) {
          if ((lost = watcher_->arena_lost(r))) break;
        }
      }
      next_check = now + check_period_;
      // After the loss was seen: everything a lost rank wrote before it left is visible.
      if (reached()) break;
      if (lost) {
        fail(Error(lost->status(), std::string(lost->what()) + " while rank " +
                                       std::to_string(rank_) + " waits for it in the host arena (" +
                                       describe(call_) + ")"));
      }
    }
    if (now >= deadline) {
      fail_timeout(awaited, value, now - start);
    }
    const Backoff::Action action = backoff.next(now);
    if (action == Backoff::Action::Spin) {
      cpu_relax();
    } else if (action == Backoff::Action::Yield) {
      sched_yield();
    } else {
      // Waiting for one rank: on its own doorbell, which only its posts ring, so that n
      // sleepers are not all woken by every post (n² wake-ups per round).
      const Doorbell bell = awaited.size() == 1 ? posted_bell(awaited[0]) : doorbell_;
      std::uint32_t sequence = bell.arm();
      if (!reached()) {
        int ms = std::min(kMaxSleepMs, std::max(1, remaining_ms(deadline)));
        bell.sleep(sequence, ms);
      }
      bell.disarm();
    }
  }
}

}  // namespace chorus::transport
