// Runs one sweep case on one rank: lays out the buffers as DESIGN.md defines
// in place and NULL-where-unused (on the heap or in the rank's window part), calls the
// algorithm, checks the result, the untouched input, the guard bytes past each buffer and
// the algorithm that ran.
#include "sweep.hpp"

#include "algorithms/two_level.hpp"
#include "sweep_values.hpp"
#include "typed_values.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace chorus::testing {
namespace {

constexpr std::size_t kGuardBytes = 32;
constexpr std::byte kGuard{0xEE};
constexpr std::byte kUnwritten{0xA5};
constexpr auto kCaseTimeout = std::chrono::seconds(20);
constexpr std::size_t kMaxReports = 4;

constexpr std::size_t kWindowAlignment = 64;

// A buffer of `bytes` followed by guard bytes that nothing may write.
struct GuardedBuffer {
  std::byte* data;
  std::size_t bytes;

  bool guard_intact() const {
    return std::all_of(data + bytes, data + bytes + kGuardBytes,
                       [](std::byte b) { return b == kGuard; });
  }
};

// Hands out one rank's guarded buffers of one case: each on the heap, or one after another
// (aligned) in the rank's window part. Their bytes read kUnwritten, their guards kGuard.
class BufferSource {
 public:
  explicit BufferSource(std::span<std::byte> window) : window_(window) {}

  GuardedBuffer take(std::size_t bytes) {
    std::byte* data = nullptr;
    if (window_.empty()) {
      data = heap_.emplace_back(bytes + kGuardBytes).data();
    } else {
      const std::size_t at = (used_ + kWindowAlignment - 1) / kWindowAlignment * kWindowAlignment;
      if (at + bytes + kGuardBytes > window_.size()) {
        throw std::logic_error("the sweep's window part of " + std::to_string(window_.size()) +
                               " bytes holds no buffer of " + std::to_string(bytes) + " at " +
                               std::to_string(at));
      }
      data = window_.data() + at;
      used_ = at + bytes + kGuardBytes;
    }
    std::fill(data, data + bytes, kUnwritten);
    std::fill(data + bytes, data + bytes + kGuardBytes, kGuard);
    return {data, bytes};
  }

 private:
  std::span<std::byte> window_;
  std::size_t used_ = 0;
  std::vector<std::vector<std::byte>> heap_;
};

// Where the send buffer sits inside the receive buffer in place (or the
// receive buffer inside the send buffer for reduce-scatter and scatter), in elements.
struct InPlaceLayout {
  bool recv_is_base;   ///< the one allocation starts at recv (else at send)
  std::size_t offset;  ///< of the other buffer inside it
};

InPlaceLayout in_place_layout(const SweepCase& c, int rank) {
  const std::size_t mine = static_cast<std::size_t>(rank) * c.count;
  const std::size_t roots = static_cast<std::size_t>(c.root) * c.count;
  switch (c.algorithm->collective) {
    case Collective::AllGather:
      return {true, mine};
    case Collective::ReduceScatter:
      return {false, mine};
    case Collective::Gather:
      return {true, roots};
    case Collective::Scatter:
      return {false, roots};
    default:
      return {true, 0};
  }
}

// Gather and scatter are in place only at the root; elsewhere both buffers exist apart.
bool effectively_in_place(const SweepCase& c, int rank) {
  Collective collective = c.algorithm->collective;
  if (collective == Collective::Gather || collective == Collective::Scatter) {
    return c.in_place && rank == c.root;
  }
  return c.in_place;
}

class RankBuffers {
 public:
  RankBuffers(const SweepCase& c, int rank, std::span<std::byte> window);
  void fill_args(algorithms::Call& args) const;
  std::vector<std::string> check(const SweepCase& c, int rank) const;

 private:
  std::size_t element_size_;
  std::size_t send_elements_, recv_elements_;
  BufferSource source_;
  std::vector<GuardedBuffer> storage_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::vector<std::byte> original_send_;
  bool send_must_survive_ = false;
  std::vector<std::size_t> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

RankBuffers::RankBuffers(const SweepCase& c, int rank, std::span<std::byte> window)
    : element_size_(dtype_size(c.dtype)),
      send_elements_(sweep_send_elements(c, rank)),
      recv_elements_(sweep_recv_elements(c, rank)),
      source_(in_window(c, rank) ? window : std::span<std::byte>()) {
  auto take = [&](std::size_t elements) {
    return storage_.emplace_back(source_.take(elements * element_size_)).data;
  };
  if (effectively_in_place(c, rank)) {
    auto layout = in_place_layout(c, rank);
    std::size_t total = std::max(send_elements_, recv_elements_);
    if (total > 0) {
      std::byte* base = take(total);
      send_ = layout.recv_is_base ? base + layout.offset * element_size_ : base;
      recv_ = layout.recv_is_base ? base : base + layout.offset * element_size_;
    }
  } else {
    if (send_elements_ > 0) send_ = take(send_elements_);
    if (recv_elements_ > 0) recv_ = take(recv_elements_);
  }
  for (std::size_t j = 0; j < send_elements_; ++j) {
    encode(sweep_input(c, rank, j), c.dtype, static_cast<std::byte*>(send_) + j * element_size_);
  }
  const std::byte* first = static_cast<const std::byte*>(send_);
  original_send_.assign(first, first + send_elements_ * element_size_);
  send_must_survive_ = !effectively_in_place(c, rank) ||
                       (c.algorithm->collective == Collective::Reduce && rank != c.root);
  for (int p = 0; p < c.nranks; ++p) {
    send_counts_.push_back(alltoallv_count(c, rank, p));
    send_displs_.push_back(alltoallv_send_displ(c, rank, p));
    recv_counts_.push_back(alltoallv_count(c, p, rank));
    recv_displs_.push_back(alltoallv_recv_displ(c, rank, p));
  }
}

void RankBuffers::fill_args(algorithms::Call& args) const {
  args.send = send_;
  args.recv = recv_;
  args.send_counts = send_counts_;
  args.send_displs = send_displs_;
  args.recv_counts = recv_counts_;
  args.recv_displs = recv_displs_;
}

std::vector<std::string> RankBuffers::check(const SweepCase& c, int rank) const {
  std::vector<std::string> wrong;
  std::vector<bool> result(recv_elements_, false);
  for (const Expectation& e : sweep_expectations(c, rank)) {
    result[e.index] = true;
    double got = decode(c.dtype, static_cast<const std::byte*>(recv_) + e.index * element_size_);
    if (got != e.value && wrong.size() < kMaxReports) {
      wrong.push_back("rank " + std::to_string(rank) + " recv[" + std::to_string(e.index) +
                      "] = " + std::to_string(got) + ", expected " + std::to_string(e.value));
    }
  }
  // Out of place, the elements that hold no result (all-to-all-v's gaps) stay unwritten.
  for (std::size_t i = 0; i < recv_elements_ && !effectively_in_place(c, rank); ++i) {
    const std::byte* element = static_cast<const std::byte*>(recv_) + i * element_size_;
    if (!result[i] && std::any_of(element, element + element_size_,
                                  [](std::byte b) { return b != kUnwritten; })) {
      wrong.push_back("rank " + std::to_string(rank) + " recv[" + std::to_string(i) +
                      "], between the results, was written");
      break;
    }
  }
  if (send_must_survive_ && send_elements_ > 0 &&
      std::memcmp(send_, original_send_.data(), original_send_.size()) != 0) {
    wrong.push_back("rank " + std::to_string(rank) + " send buffer was modified");
  }
  for (const GuardedBuffer& buffer : storage_) {
    if (!buffer.guard_intact())
      wrong.push_back("rank " + std::to_string(rank) + " wrote past a buffer");
  }
  return wrong;
}

// The algorithm that must run the case: its own, but shm_direct where an algorithm that needs
// shared windows finds some rank's buffers outside them, and the leaders' form (hierarchical)
// where a striped one finds hosts it cannot stripe.
const algorithms::Algorithm& expected_runner(const SweepCase& c, const Topology& topology) {
  if (c.algorithm->name == "striped" && !algorithms::stripes_fit(topology)) {
    return *algorithms::find_algorithm(c.algorithm->collective, "hierarchical");
  }
  const bool windows = (c.algorithm->needs & algorithms::kNeedsSharedWindows) != 0;
  if (!windows || c.placement == Placement::Windows) return *c.algorithm;
  return *algorithms::find_algorithm(c.algorithm->collective, "shm_direct");
}

algorithms::Call make_args(const SweepCase& c) {
  algorithms::Call args;
  const Collective collective = c.algorithm->collective;
  args.collective = collective;
  args.count = collective == Collective::AllToAllV ? 0 : c.count;
  args.dtype = c.dtype;
  args.op = c.op;
  args.root = c.root;
  args.fingerprint.seq = c.seq;
  args.fingerprint.count = args.count;
  args.fingerprint.root = is_rooted(collective) ? c.root : -1;
  args.fingerprint.collective = collective;
  args.fingerprint.dtype = static_cast<std::uint8_t>(c.dtype);
  args.fingerprint.op = is_reducing(collective) ? static_cast<std::uint8_t>(c.op) : 0;
  return args;
}

}  // namespace

std::size_t sweep_window_bytes(const std::vector<SweepCase>& cases) {
  std::size_t most = kWindowAlignment;  // a part even when no case uses it
  for (const SweepCase& c : cases) {
    for (int rank = 0; rank < c.nranks; ++rank) {
      if (!in_window(c, rank)) continue;
      const std::size_t send = sweep_send_elements(c, rank) * dtype_size(c.dtype);
      const std::size_t recv = sweep_recv_elements(c, rank) * dtype_size(c.dtype);
      const std::size_t bytes = effectively_in_place(c, rank) ? std::max(send, recv) : send + recv;
      most = std::max(most, bytes + 2 * (kGuardBytes + kWindowAlignment));
    }
  }
  return most;
}

std::vector<std::string> run_sweep_case(const algorithms::Context& context, const SweepCase& c,
                                        std::span<std::byte> window) {
  const int rank = context.rank();
  RankBuffers buffers(c, rank, window);
  algorithms::Call args = make_args(c);
  buffers.fill_args(args);
  algorithms::Context timed = context;
  timed.deadline = Clock::now() + kCaseTimeout;
  const algorithms::Outcome outcome = c.algorithm->execute(args, timed);
  std::vector<std::string> problems = buffers.check(c, rank);
  const algorithms::Algorithm& expected = expected_runner(c, context.transport.topology());
  if (outcome.ran != &expected) {
    problems.push_back("rank " + std::to_string(rank) + " ran " + std::string(outcome.ran->name) +
                       ", expected " + std::string(expected.name));
  }
  return problems;
}

}  // namespace chorus::testing
