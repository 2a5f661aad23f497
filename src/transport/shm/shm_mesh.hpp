// Connecting the shared-memory links of a mesh: every rank with same-host
// peers creates its inbox, announces it, maps the inboxes of those peers,
// announces that, and unlinks its own inbox once every peer mapped it (from
// then on nothing is left in /dev/shm, even after a crash).
//
// Store keys (inside the communicator's namespace): "transport/shm/ready/<r>"
// (value: ring capacity in bytes) and "transport/shm/mapped/<r>".
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

/// Ring capacity: CHORUS_SHM_RING_BYTES (a power of two, 4 KiB .. 256 MiB), default 1 MiB.
std::uint64_t ring_capacity_from_env();

/// Links from `rank` to every other rank of `host_ranks` (ascending, includes
/// `rank`; at least two ranks). Collective over `host_ranks`.
ShmMesh connect_shm_mesh(Store& store, int rank, const std::vector<int>& host_ranks,
                         const std::vector<RankInfo>& infos, Deadline deadline);

}  // namespace chorus::transport::shm
