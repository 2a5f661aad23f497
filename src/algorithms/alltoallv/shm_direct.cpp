// All-to-all-v directly in the host arena.
//
// Counts differ per pair, and a rank knows only its own row of the count
// matrix (what it sends) and its own column (what it receives), so no rank can
// tell alone how many rounds the call takes. Round 1 therefore opens each
// rank's buffer with a header of n + 1 words: the rounds this rank needs to
// send everything, then the bytes it sends each rank. Every rank waits for
// every flag of round 1 (it reads a header from each), so after round 1 all
// agree on R = the largest need, and every rank leaves after round R.
//
// Each pair (i, j), i != j, moves its bytes as one stream, cut the same way by
// both ends: `first` bytes in round 1, `later` bytes in each round after (both
// multiples of 64, so of every dtype size). A round's bytes after the header
// are n - 1 such pieces, one per other rank (a rank's own block goes straight
// from send to recv). The receiver cuts its stream from recv_counts[i]; before
// reading anything of i it checks that i's header sends it exactly that many
// bytes, and otherwise fails with a Mismatch naming both ranks and both counts
// (the sentence of a message-based receive), whose abort frame then stops the
// ranks that would wait for its next flag.
//
// Rounds after the first wait only for the ranks that send this rank something
// in them; begin_round still keeps every rank within one round of the others.
// send == recv: the input is snapshotted first (as pairwise does), because
// later rounds still read it after earlier ones wrote recv.
//
// Copies into the arena stream (stream_copy.hpp) when what this rank
// sends, times n, reaches kStreamFromBytes (for equal blocks, the call's bytes in
// all, as in all-to-all); copies out of it when what it receives does. Each rank
// decides alone: the choice changes how its own stores reach memory, not what
// any peer sees.
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/stream_copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace chorus::algorithms {
namespace {

using transport::HostArena;

constexpr std::size_t kPieceAlign = 64;
constexpr std::size_t kWord = sizeof(std::uint64_t);

/// How every pair's byte stream is cut into rounds; the same on every rank
/// (round_bytes and n are). Rounds k are numbered from 1 within the call.
struct RoundPlan {
  std::size_t header;  ///< round 1 only: n + 1 words, rounded up to 64 bytes
  std::size_t first;   ///< piece bytes in round 1 (0 when a tiny arena holds only the header)
  std::size_t later;   ///< piece bytes in each later round

  RoundPlan(std::size_t round_bytes, int n) {
    const auto others = static_cast<std::size_t>(n - 1);
    header = ((others + 2) * kWord + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    first = round_bytes > header ? (round_bytes - header) / others / kPieceAlign * kPieceAlign : 0;
    later = round_bytes / others / kPieceAlign * kPieceAlign;
    // The arena gives a round >= 64 bytes per rank (HostArena::connect).
    if (later == 0) {
      throw Error(Status::InternalError,
                  "alltoallv shm_direct: a round of " + std::to_string(round_bytes) +
                      " bytes has no room for " + std::to_string(n - 1) + " pieces of 64 bytes");
    }
  }
  /// Rounds a stream of `bytes` needs; at least 1, since round 1 carries the header.
  std::uint64_t rounds_for(std::size_t bytes) const {
    return bytes <= first ? 1 : 1 + (bytes - first + later - 1) / later;
  }
  std::size_t start(std::uint64_t k) const { return k == 1 ? 0 : first + (k - 2) * later; }
  /// Bytes of a stream of `total` bytes that round k carries.
  std::size_t carried(std::uint64_t k, std::size_t total) const {
    const std::size_t begin = start(k);
    return begin >= total ? 0 : std::min(k == 1 ? first : later, total - begin);
  }
  /// Offset of piece `slot` in a round-k buffer.
  std::size_t offset(std::uint64_t k, int slot) const {
    return (k == 1 ? header : 0) + static_cast<std::size_t>(slot) * (k == 1 ? first : later);
  }
};

/// One rank's part of one call.
class Exchange {
 public:
  Exchange(HostArena& arena, const Call& args, Deadline deadline, const void* source)
      : arena_(arena),
        args_(args),
        deadline_(deadline),
        source_(source),
        n_(arena.size()),
        r_(arena.rank()),
        plan_(arena.round_bytes(), arena.size()),
        copy_in_(arena_copy(streams(&Exchange::sent_to))),
        copy_out_(arena_copy(streams(&Exchange::expected_from))) {}

  void run() {
    std::uint64_t rounds = own_rounds();
    for (std::uint64_t k = 1; k <= rounds; ++k) {
      const std::uint64_t g = arena_.begin_round(deadline_);
      write_round(g, k);
      arena_.post(2 * g);
      for (int step = 1; step < n_; ++step) {
        const int j = (r_ + step) % n_;
        if (k == 1) rounds = std::max(rounds, read_header(j, g));
        read_piece(j, g, k);
      }
    }
  }

 private:
  std::size_t sent_to(int j) const { return bytes_of(args_.send_counts[index(j)], args_.dtype); }
  std::size_t expected_from(int j) const {
    return bytes_of(args_.recv_counts[index(j)], args_.dtype);
  }
  static std::size_t index(int j) { return static_cast<std::size_t>(j); }
  /// Whether the bytes `side` gives over all peers, times n, reach kStreamFromBytes.
  bool streams(std::size_t (Exchange::*side)(int) const) const {
    std::size_t total = 0;
    for (int j = 0; j < n_; ++j) total += (this->*side)(j);
    return total * static_cast<std::size_t>(n_) >= kStreamFromBytes;
  }
  /// The piece of `receiver` in `sender`'s buffer: senders skip themselves.
  static int slot(int sender, int receiver) { return receiver - (receiver > sender ? 1 : 0); }

  std::uint64_t own_rounds() const {
    std::uint64_t rounds = 1;
    for (int j = 0; j < n_; ++j) {
      if (j != r_) rounds = std::max(rounds, plan_.rounds_for(sent_to(j)));
    }
    return rounds;
  }

  void write_round(std::uint64_t g, std::uint64_t k) {
    std::byte* buffer = arena_.buffer(r_, g);
    if (k == 1) write_header(buffer);
    for (int j = 0; j < n_; ++j) {
      const std::size_t bytes = j == r_ ? 0 : plan_.carried(k, sent_to(j));
      if (bytes == 0) continue;
      const std::byte* block = element_at(source_, args_.send_displs[index(j)], args_.dtype);
      copy_in_(buffer + plan_.offset(k, slot(r_, j)), block + plan_.start(k), bytes);
    }
  }

  void write_header(std::byte* buffer) const {
    const std::uint64_t need = own_rounds();
    copy_bytes(buffer, &need, kWord);
    for (int j = 0; j < n_; ++j) {
      const std::uint64_t bytes = sent_to(j);
      copy_bytes(buffer + kWord * (1 + index(j)), &bytes, kWord);
    }
  }

  /// Waits for rank j's round 1, checks what it sends this rank; returns its need.
  std::uint64_t read_header(int j, std::uint64_t g) {
    arena_.wait_for(j, 2 * g, deadline_);
    const std::byte* buffer = arena_.buffer(j, g);
    std::uint64_t need = 0, sent = 0;
    copy_bytes(&need, buffer, kWord);
    copy_bytes(&sent, buffer + kWord * (1 + index(r_)), kWord);
    if (sent != expected_from(j)) fail_count(j, sent);
    return need;
  }

  [[noreturn]] void fail_count(int j, std::uint64_t sent) const {
    const std::string me = "rank " + std::to_string(r_);
    const std::string them = "rank " + std::to_string(j);
    const std::size_t size = dtype_size(args_.dtype);
    throw Error(Status::Mismatch, me + " expected " + std::to_string(expected_from(j)) +
                                      " bytes from " + them + " for " +
                                      describe(args_.fingerprint) + " but " + them + " sent " +
                                      std::to_string(sent) + " bytes (in elements: " + me +
                                      " expects " + std::to_string(args_.recv_counts[index(j)]) +
                                      ", " + them + " sends " + std::to_string(sent / size) + ")");
  }

  /// Copies what round k brings from rank j (its header, if k == 1, is checked).
  void read_piece(int j, std::uint64_t g, std::uint64_t k) {
    const std::size_t bytes = plan_.carried(k, expected_from(j));
    if (bytes == 0) return;
    if (k > 1) arena_.wait_for(j, 2 * g, deadline_);
    std::byte* block = element_at(args_.recv, args_.recv_displs[index(j)], args_.dtype);
    copy_out_(block + plan_.start(k), arena_.buffer(j, g) + plan_.offset(k, slot(j, r_)), bytes);
  }

  HostArena& arena_;
  const Call& args_;
  const Deadline deadline_;
  const void* source_;
  const int n_;
  const int r_;
  const RoundPlan plan_;
  const ArenaCopy copy_in_;
  const ArenaCopy copy_out_;
};

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  Scratch snapshot;
  const void* source = alltoallv_input(args, &snapshot);
  copy_alltoallv_self_block(args, ctx.rank(), source);
  HostArena& arena = begin_arena_call(args, ctx);
  Exchange(arena, args, ctx.deadline, source).run();
}

double cost(const CostInput& in) { return arena_cost(in, 2, (2 * in.shape().n - 1) * in.m()); }

}  // namespace

const Algorithm rows::alltoallv_shm_direct{
    .name = "shm_direct",
    .description = "one host: per-peer pieces in arena rounds; round 1 agrees counts",
    .collective = Collective::AllToAllV,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
