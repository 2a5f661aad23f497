// All-reduce on buffers inside the communicator's shared windows
// (transport/shm/windows.hpp): no copy through the arena.
//
// Round g (a tiny arena round): every rank publishes a card, the windows of its send
// and receive buffers and their offsets in its parts (0: some buffer lies outside
// every window), and posts 2g. When every card names the same two windows, each
// rank r reduces slice r (patterns::block_of) of every rank's input, chunk by chunk
// into its own output, and copies each finished chunk into slice r of every peer's
// output; then it posts 2g + 1 and waits until every rank has, because peers write
// its output and read its input until then. Otherwise every rank runs shm_direct.
//
// An average (Avg lowered to Sum) is divided chunk by chunk before the copies.
//
// In place (send == recv) is safe: slice r of any rank's buffers is read and written
// by rank r alone, which writes a chunk only after reading it. Every element is
// reduced by one rank, so all ranks hold the same bits. Memory traffic per rank: the
// message read once and written once, against shm_direct's copy in, reduction and
// copy out.
#include "algorithms/catalog.hpp"
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "core/copy.hpp"
#include "core/reduce.hpp"
#include "transport/shm/host_arena.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace chorus::algorithms {
namespace {

using transport::shm::HostArena;
using transport::shm::WindowPlace;

/// Above this the arena's one-round path (one flag exchange) no longer wins.
constexpr std::size_t kMinWindowBytes = 16 * 1024;
/// Bytes reduced before they are copied out to the peers (stay in the cache meanwhile).
constexpr std::size_t kChunkBytes = 64 * 1024;

/// A rank's buffers: the windows (send's id in the high half, recv's in the low half; 0:
/// some buffer lies outside every window) and the offsets in this rank's parts.
struct Card {
  std::uint64_t ids;
  std::uint64_t send;
  std::uint64_t recv;
};
static_assert(sizeof(Card) <= transport::shm::kInlineBytes);

Card card_of(HostArena& arena, const CollectiveArgs& args, std::size_t bytes) {
  const auto& windows = arena.windows();
  const WindowPlace send = windows.find(args.send, bytes, arena.rank());
  const WindowPlace recv = windows.find(args.recv, bytes, arena.rank());
  constexpr std::uint64_t kMaxId = 0xffffffffu;
  if (send.id == 0 || recv.id == 0 || send.id > kMaxId || recv.id > kMaxId) return {0, 0, 0};
  return {send.id << 32 | recv.id, send.offset, recv.offset};
}

void reduce_and_scatter_slice(HostArena& arena, const CollectiveArgs& args,
                              const std::vector<Card>& cards) {
  const int n = arena.size();
  const int r = arena.rank();
  const std::uint64_t send_id = cards[0].ids >> 32;
  const std::uint64_t recv_id = cards[0].ids & 0xffffffffu;
  std::vector<const std::byte*> send(static_cast<std::size_t>(n));
  std::vector<std::byte*> recv(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    const Card& card = cards[static_cast<std::size_t>(j)];
    send[static_cast<std::size_t>(j)] = arena.windows().part(send_id, j) + card.send;
    recv[static_cast<std::size_t>(j)] = arena.windows().part(recv_id, j) + card.recv;
  }
  const auto own = patterns::block_of(args.count, n, r);
  const std::size_t chunk = std::max<std::size_t>(1, kChunkBytes / dtype_size(args.dtype));
  for (std::size_t done = 0; done < own.count; done += chunk) {
    const std::size_t first = own.offset + done;
    const std::size_t c = std::min(chunk, own.count - done);
    auto at = [&](const std::byte* base) { return element_at(base, first, args.dtype); };
    std::byte* out = element_at(recv[static_cast<std::size_t>(r)], first, args.dtype);
    const int next = (r + 1) % n;
    reduce_into(out, at(send[static_cast<std::size_t>(r)]), at(send[static_cast<std::size_t>(next)]),
                c, args.dtype, args.op);
    for (int k = (next + 1) % n; k != r; k = (k + 1) % n) {
      reduce_inplace(out, at(send[static_cast<std::size_t>(k)]), c, args.dtype, args.op);
    }
    if (args.average_folded) finalize_average(out, c, args.dtype, n);
    for (int step = 1; step < n; ++step) {
      const auto j = static_cast<std::size_t>((r + step) % n);
      copy_bytes(element_at(recv[j], first, args.dtype), out, bytes_of(c, args.dtype));
    }
  }
}

}  // namespace

bool accepts_shared_window(const CollectiveArgs& args, int nranks) {
  return args.host_arena && args.shared_windows && nranks > 1 &&
         bytes_of(args.count, args.dtype) > kMinWindowBytes;
}

void allreduce_shm_window(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  HostArena& arena = begin_arena_call(transport, args);
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  const std::uint64_t g = arena.begin_round(args.deadline, sizeof(Card));
  const Card mine = card_of(arena, args, bytes);
  std::memcpy(arena.buffer(arena.rank(), g), &mine, sizeof(mine));
  arena.post(2 * g);
  arena.wait_all(2 * g, args.deadline);
  std::vector<Card> cards(static_cast<std::size_t>(arena.size()));
  bool usable = true;
  for (int j = 0; j < arena.size(); ++j) {
    std::memcpy(&cards[static_cast<std::size_t>(j)], arena.buffer(j, g), sizeof(Card));
    usable = usable && cards[static_cast<std::size_t>(j)].ids != 0 &&
             cards[static_cast<std::size_t>(j)].ids == cards[0].ids;
  }
  // A rank that names a window has it mapped (windows.hpp); all decide from the same cards.
  if (!usable) return run_shm_direct_instead(transport, args, allreduce_shm_direct);
  reduce_and_scatter_slice(arena, args, cards);
  if (args.average_folded) *args.average_folded = true;
  arena.post(2 * g + 1);
  arena.wait_all(2 * g + 1, args.deadline);
}

}  // namespace chorus::algorithms
