// Connecting the shared-memory links of a mesh: the first rank of each host
// creates the inboxes of the host's ranks in one anonymous segment
// (transport/arena/segment.hpp, shm/inbox.hpp) and announces it; the host's other
// ranks map it (one mapping and one descriptor hand-over per rank, whatever the
// number of peers) and announce that; the creator withdraws the segment once all
// have. Nothing ever appears in /dev/shm. A rank makes 3 store requests (a get
// and a barrier, bootstrap/store_exchange.hpp), the creator 3.
//
// Memory: a rank's inbox holds one ring per same-host peer, of shm_budget::ring_bytes:
// 1 MiB up to 8 ranks on the host, then shrinking so that the host's rings take at most
// 64 MiB (256 B each past 512 ranks).
//
// Store keys (inside the communicator's namespace), per host named by its first rank f:
// "transport/shm/ready/<f>" ("<ring capacity in bytes> <segment locator>") and the
// barrier "transport/shm/mapped/<f>".
#pragma once

#include "bootstrap/store.hpp"
#include "transport/doorbell.hpp"
#include "transport/link.hpp"
#include "transport/rank_info.hpp"

#include <memory>
#include <vector>

namespace chorus::transport::shm {

struct ShmMesh {
  std::vector<std::unique_ptr<Link>> links;  ///< by rank; null where not shared memory
  Doorbell doorbell;                         ///< this rank's; mapped while the links live
};

/// Ring capacity on a host of `host_ranks` ranks: CHORUS_SHM_RING_BYTES when set (a power
/// of two, 256 B .. 256 MiB), else shm_budget::ring_bytes(host_ranks).
std::uint64_t ring_capacity(int host_ranks);

struct ShmOptions {
  /// Rings are sized for at least this many ranks on the host: a sub-communicator
  /// passes its parent's count, so that the groups of one split together hold no
  /// more ring memory per rank than the parent.
  int sized_for = 0;
  Deadline deadline;
};

/// Links from `rank` to every other rank of `host_ranks` (ascending, includes
/// `rank`; at least two ranks). Collective over `host_ranks`.
ShmMesh connect_shm_mesh(Store& store, int rank, const std::vector<int>& host_ranks,
                         const std::vector<RankInfo>& infos, const ShmOptions& options);

}  // namespace chorus::transport::shm
