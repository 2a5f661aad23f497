// Chorus C++ API: a Communicator is a group of ranks that run collectives together.
//
// Every operation has a non-blocking form (i-prefixed) returning a Request, and
// a blocking form that waits for it. Operations on one communicator complete in
// the order they were issued. Failures throw chorus::Error (see error.hpp and
// docs/errors.md); argument errors are thrown before anything is sent.
//
// Communicator and Request are cheap-to-copy handles (shared state).
#pragma once

#include <chorus/error.hpp>
#include <chorus/types.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace chorus {

namespace detail {
struct RequestState;
struct CommState;
}  // namespace detail

/// Handle to one non-blocking operation.
class CHORUS_EXPORT Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  bool valid() const { return state_ != nullptr; }
  /// Blocks until the operation completes; throws its error. The operation's own
  /// deadline (CHORUS_TIMEOUT) bounds the wait.
  void wait();
  /// Waits at most `timeout`; true when the operation completed (throws its error).
  bool wait_for(std::chrono::milliseconds timeout);
  /// True when complete (throws its error); never blocks.
  bool test();
  /// For a receive: the rank the message came from, known once the request completed (for a
  /// receive from a named peer, that peer). -1 for other operations, while pending, or after
  /// a failure.
  int source() const;

 private:
  std::shared_ptr<detail::RequestState> state_;
};

struct InitOptions {
  int nranks = 1;
  int rank = 0;
  std::string store_address;  ///< "host:port" of the store
  bool host_store = true;     ///< rank 0 starts the store server on store_address's port
  std::optional<std::string> auth_token;             ///< default: CHORUS_AUTH_TOKEN
  std::optional<std::string> transport;              ///< default: CHORUS_TRANSPORT
  std::optional<std::chrono::milliseconds> timeout;  ///< default: CHORUS_TIMEOUT
  /// The launcher's restart count (CHORUS_RESTART_COUNT under chorusrun --max-restarts):
  /// communicators of different restarts keep apart in the store, so a rank left over from a
  /// failed run never meets the restarted job.
  int restart = 0;
};

class CHORUS_EXPORT Communicator {
 public:
  /// An empty handle (what split returns for a negative color).
  Communicator() = default;

  /// Joins the job described by `options`; collective over all ranks.
  static Communicator init(const InitOptions& options);
  /// Joins using the launcher's variables (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT,
  /// falling back to Slurm, Open MPI and PMI variables); the store is at
  /// CHORUS_STORE_ADDR:CHORUS_STORE_PORT when set (chorusrun sets them).
  static Communicator init_from_env();

  explicit operator bool() const { return state_ != nullptr; }
  int rank() const;
  int size() const;

  /// Collective: ranks with equal color form a new communicator ordered by
  /// (key, parent rank). color < 0 takes part but returns an empty handle.
  Communicator split(int color, int key);
  /// As split(color, key), and names the new communicator: its flight-recorder name (see
  /// name()) gets ".<name>" appended, so a dump after a hang says which group is stuck (the
  /// training mesh names its groups "tp", "dp", ...). `name` is at most 32 letters, digits,
  /// '_' or '-' (it goes into file names), else InvalidArgument before anything is sent; ""
  /// leaves the communicator unnamed. Members may pass different names: each rank's record
  /// carries its own.
  Communicator split(int color, int key, std::string_view name);

  /// The communicator's name in the flight recorder and its dump files: "world" for what init
  /// returns, "<parent>.split<N>.color<C>" for the N-th split of a parent, with ".<name>"
  /// appended when the split was named (e.g. "world.split3.color0.tp").
  std::string name() const;

  /// Fails every pending and later operation (chorusInvalidUsage on this rank,
  /// chorusRemoteError on peers that notice). Thread-safe; never blocks long.
  void abort();

  /// The last failure on this communicator as a sentence ("" when none).
  std::string last_error() const;

  /// Collective: `bytes` bytes for this rank (ranks may ask for different sizes) in memory
  /// the ranks of this host share, 64-byte aligned. When every rank lives on one host with
  /// shared memory, all-reduces, reduce-scatters and all-gathers whose buffers lie in such
  /// memory on every rank read and write the peers' buffers directly (algorithm
  /// "shm_window"), with no copy through the arena; otherwise (other hosts, CHORUS_TRANSPORT=tcp)
  /// it is ordinary memory. Zero bytes returns nullptr. Call it, like a collective, in the same
  /// order on every rank. Memory not freed goes with the communicator.
  void* alloc_shared(std::size_t bytes);
  /// Frees what alloc_shared returned on this rank; local (no peer takes part), like free():
  /// no operation may still be using it. nullptr does nothing; any other pointer is
  /// InvalidArgument.
  void free_shared(void* ptr);

  // Non-blocking operations. Buffers must stay valid until the request completes.
  Request iall_reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  Request ibroadcast(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  Request ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                  int root);
  Request iall_gather(const void* send, void* recv, std::size_t send_count, DataType dtype);
  Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                          ReduceOp op);
  Request igather(const void* send, void* recv, std::size_t send_count, DataType dtype, int root);
  Request iscatter(const void* send, void* recv, std::size_t recv_count, DataType dtype, int root);
  Request iall_to_all(const void* send, void* recv, std::size_t count, DataType dtype);
  /// Counts and displacements in elements, one entry per rank.
  Request iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                        std::span<const std::size_t> send_displs, void* recv,
                        std::span<const std::size_t> recv_counts,
                        std::span<const std::size_t> recv_displs, DataType dtype);
  /// Point-to-point. The untagged forms use tag 0. A receive takes the earliest message from
  /// `peer` whose tag equals its own; messages with other tags wait for their own receive
  /// (MPI's matching rule), so messages stay ordered per (sender, receiver, tag). A receive
  /// must name exactly the sender's count and dtype, else both sides fail with Mismatch.
  /// tag < 0 is InvalidArgument. Point-to-point requests are kept in flight: they do not wait
  /// for earlier operations on this communicator, nor later ones for them. A peer lost while
  /// a receive from it is pending fails that receive with RemoteError.
  Request isend(const void* buf, std::size_t count, DataType dtype, int peer);
  Request irecv(void* buf, std::size_t count, DataType dtype, int peer);
  Request isend(const void* buf, std::size_t count, DataType dtype, int peer, int tag);
  Request irecv(void* buf, std::size_t count, DataType dtype, int peer, int tag);
  /// Receives the next message with `tag` from whichever peer sends one first (one message,
  /// exactly `count` elements of `dtype`, else Mismatch); Request::source() tells who sent it.
  /// Messages already arrived are taken earliest arrival first; a tagged receive naming the
  /// sender and an any-source receive compete in posting order. Losing ANY peer fails a
  /// pending any-source receive with RemoteError (like MPI_ERR_PROC_FAILED). On a 1-rank
  /// communicator nobody can send: InvalidUsage.
  Request irecv_any(void* buf, std::size_t count, DataType dtype, int tag);
  Request ibarrier();

  // Blocking forms: the calling thread runs the operation itself (no hand-off to the
  // communicator's worker thread) once the operations issued before it are done.
  void all_reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  void broadcast(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  void reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
              int root);
  void all_gather(const void* send, void* recv, std::size_t send_count, DataType dtype);
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                      ReduceOp op);
  void gather(const void* send, void* recv, std::size_t send_count, DataType dtype, int root);
  void scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype, int root);
  void all_to_all(const void* send, void* recv, std::size_t count, DataType dtype);
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_displs, void* recv,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_displs, DataType dtype);
  void send(const void* buf, std::size_t count, DataType dtype, int peer);
  void recv(void* buf, std::size_t count, DataType dtype, int peer);
  void send(const void* buf, std::size_t count, DataType dtype, int peer, int tag);
  void recv(void* buf, std::size_t count, DataType dtype, int peer, int tag);
  /// Blocking any-source receive; returns the sender's rank.
  int recv_any(void* buf, std::size_t count, DataType dtype, int tag);
  void barrier();

  /// Name of the algorithm the last collective issued on this rank ran ("" if none).
  std::string last_algorithm() const;

 private:
  explicit Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace chorus
