// WindowCall: the cards and the agreement; see window.hpp.
#include "algorithms/window.hpp"

#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "core/reduce.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {
namespace {

using transport::HostArena;
using transport::WindowPlace;

/// A rank's buffers: the windows (send's id in the high half, recv's in the low half; 0:
/// some buffer lies outside every window) and the offsets in this rank's parts.
struct Card {
  std::uint64_t ids;
  std::uint64_t send;
  std::uint64_t recv;
};
static_assert(sizeof(Card) <= transport::kInlineBytes);

Card card_of(HostArena& arena, const Call& args, std::size_t send_bytes, std::size_t recv_bytes) {
  const auto& windows = arena.windows();
  const WindowPlace send = windows.find(args.send, send_bytes, arena.rank());
  const WindowPlace recv = windows.find(args.recv, recv_bytes, arena.rank());
  constexpr std::uint64_t kMaxId = 0xffffffffu;
  if (send.id == 0 || recv.id == 0 || send.id > kMaxId || recv.id > kMaxId) return {0, 0, 0};
  return {send.id << 32 | recv.id, send.offset, recv.offset};
}

}  // namespace

bool accepts_shared_window(const Call& args, int nranks) {
  if (nranks < 2) return false;
  const std::size_t block = bytes_of(args.count, args.dtype);
  const std::size_t largest =
      args.collective == Collective::AllReduce ? block : block * static_cast<std::size_t>(nranks);
  return largest > kMinWindowBytes;
}

WindowCall::WindowCall(const Call& args, const Context& ctx, std::size_t send_bytes,
                       std::size_t recv_bytes)
    : ctx_(ctx), args_(args), arena_(begin_arena_call(args, ctx)) {
  round_ = arena_.begin_round(ctx.deadline, sizeof(Card));
  const Card mine = card_of(arena_, args, send_bytes, recv_bytes);
  std::memcpy(arena_.buffer(arena_.rank(), round_), &mine, sizeof(mine));
  arena_.post(2 * round_);
  arena_.wait_all(2 * round_, ctx.deadline);
  const auto n = static_cast<std::size_t>(arena_.size());
  std::vector<Card> cards(n);
  usable_ = true;
  for (std::size_t j = 0; j < n; ++j) {
    std::memcpy(&cards[j], arena_.buffer(static_cast<int>(j), round_), sizeof(Card));
    usable_ = usable_ && cards[j].ids != 0 && cards[j].ids == cards[0].ids;
  }
  if (!usable_) return;
  const std::uint64_t send_id = cards[0].ids >> 32;
  const std::uint64_t recv_id = cards[0].ids & 0xffffffffu;
  send_.resize(n);
  recv_.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    send_[j] = arena_.windows().part(send_id, static_cast<int>(j)) + cards[j].send;
    recv_[j] = arena_.windows().part(recv_id, static_cast<int>(j)) + cards[j].recv;
  }
}

std::size_t WindowCall::chunk_elements() const {
  // Half types accumulate in fp32: the chunk is sized by its accumulator.
  return std::max<std::size_t>(1, kWindowChunkBytes / dtype_size(partial_type(args_)));
}

void WindowCall::reduce_inputs(std::size_t first, std::size_t count, std::byte* out) const {
  const int n = arena_.size();
  const int r = arena_.rank();
  Operands inputs(static_cast<std::size_t>(n));
  for (int step = 0; step < n; ++step) {
    inputs.push_back(element_at(send((r + step) % n), first, args_.dtype));
  }
  // Every element is reduced here, by one rank, from all n inputs: one rounding.
  reduce_all(out, inputs, count, args_, args_.average ? n : 1);
}

void WindowCall::finish() {
  arena_.post(2 * round_ + 1);
  arena_.wait_all(2 * round_ + 1, ctx_.deadline);
}

}  // namespace chorus::algorithms
