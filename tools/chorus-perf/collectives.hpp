// The collectives chorus-perf can time: their shapes (how a message size turns
// into counts and buffers), their in-place buffer arrangement (DESIGN.md,
// "Exact meanings"), the call itself, and the nccl-tests bus-bandwidth factor.
#pragma once

#include <chorus/communicator.hpp>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace chorus::perf {

enum class Bench {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  AllToAllV,
  SendRecv,
  Barrier,
};

struct BenchInfo {
  Bench bench;
  std::string_view name;
  bool reduces;       ///< takes a reduce op
  bool rooted;        ///< takes a root
  bool blocked;       ///< the message is n blocks, one per rank
  bool has_in_place;  ///< DESIGN.md defines an in-place form
  std::string_view bus_factor_text;
};

std::span<const BenchInfo> all_benches();
/// Null when unknown.
const BenchInfo* find_bench(std::string_view name);

/// nccl-tests' busbw / algbw for `nranks` ranks (0 for barrier).
double bus_factor(Bench bench, int nranks);

/// One timed case. Counts are elements. For blocked collectives count = n * block
/// (count rounded down to a multiple of n), otherwise block = count.
struct Case {
  Bench bench = Bench::AllReduce;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;  ///< meaningful when the bench reduces
  int root = 0;                 ///< meaningful when the bench is rooted
  int rank = 0;
  int nranks = 1;
  std::size_t count = 0;
  std::size_t block = 0;
};

/// The case for a message of `bytes` bytes (see usage: size semantics).
Case make_case(Bench bench, std::size_t bytes, DataType dtype, ReduceOp op, int root, int rank,
               int nranks);

/// Elements rank `from` sends rank `to` in the alltoallv case:
/// block - ((from + to) mod 2) * (block / 2).
std::size_t alltoallv_count(const Case& c, int from, int to);

/// Bytes the row's algbw divides by the time: count * dtype size, except for
/// alltoallv (mean bytes actually sent per rank) and barrier (0).
double algbw_bytes(const Case& c);

/// The buffers of one run. Out of place: separate send and receive storage.
/// In place: one storage, with send/recv placed as DESIGN.md defines (e.g.
/// allgather send = recv + rank*block). send_elems/recv_elems are the regions
/// the call reads and writes.
/// A buffer's bytes: from the heap, or from Communicator::alloc_shared (--shared).
class Storage {
 public:
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  Storage(Storage&& other) noexcept;
  Storage& operator=(Storage&&) = delete;
  ~Storage();
  /// `bytes` zero bytes; collective over `shared_from` when it is not nullptr.
  void allocate(std::size_t bytes, Communicator* shared_from);
  std::byte* data() { return shared_ ? shared_ : heap_.data(); }
  std::size_t size() const { return size_; }

 private:
  std::vector<std::byte> heap_;
  std::byte* shared_ = nullptr;
  Communicator* comm_ = nullptr;
  std::size_t size_ = 0;
};

struct Buffers {
  Storage first, second;
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::size_t send_elems = 0;
  std::size_t recv_elems = 0;
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;  ///< alltoallv
};

/// `shared_from`: allocate from that communicator's shared memory (collective), else the heap.
Buffers make_buffers(const Case& c, bool in_place, Communicator* shared_from = nullptr);

/// Runs the collective once (blocking). sendrecv: each rank sends to rank+1 and
/// receives from rank-1 (mod n), even ranks posting the send first.
void run_once(Communicator& comm, const Case& c, Buffers& buffers);

}  // namespace chorus::perf
