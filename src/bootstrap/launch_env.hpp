// Where this process sits in the job, read from the launcher's variables:
// torchrun/chorusrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
// then Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), Open MPI
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMI (PMI_RANK, PMI_SIZE).
#pragma once

#include <functional>
#include <string>

namespace chorus {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;  ///< host of the store: CHORUS_STORE_ADDR, else MASTER_ADDR
  int master_port = 0;      ///< port of the store: CHORUS_STORE_PORT, else MASTER_PORT
  std::string source;       ///< "torchrun", "slurm", "openmpi", "pmi"
  int restart = 0;          ///< CHORUS_RESTART_COUNT (chorusrun --max-restarts), else 0
};

using GetEnv = std::function<const char*(const char*)>;

/// The first launcher whose rank variable is set wins (torchrun also when only
/// WORLD_SIZE is set); unset and empty variables are the same.
/// - LOCAL_RANK (or the launcher's equivalent) defaults to 0.
/// - MASTER_ADDR and MASTER_PORT are read under every launcher. Without
///   MASTER_ADDR the store is at 127.0.0.1 when every rank is on this host
///   (WORLD_SIZE == 1, LOCAL_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE /
///   MPI_LOCALNRANKS equal to the size, SLURM_NNODES == 1, or PMI without any
///   hint); otherwise it is an error asking to set MASTER_ADDR.
/// - MASTER_PORT defaults to 29500 (torchrun's default).
/// - CHORUS_STORE_ADDR and CHORUS_STORE_PORT, when set, take the place of MASTER_ADDR
///   and MASTER_PORT: chorusrun's store, on a port apart from the program's own
///   rendezvous (torch's env:// TCPStore binds MASTER_PORT on rank 0).
/// - CHORUS_RESTART_COUNT, when set, is the launcher's restart count (0 or more).
/// Throws Error(InvalidArgument) naming the variable that is missing or
/// malformed: integers must parse fully, 0 <= rank < size, 0 <= local rank < size,
/// 1 <= port <= 65535; and when no launcher variables are found at all.
LaunchInfo read_launch_env(const GetEnv& getenv_fn);
/// Same, reading the process environment.
LaunchInfo read_launch_env();

/// A string identifying this host: hostname + "/" + the kernel's boot id
/// (hostname alone when the boot id is unreadable). Equal for every process on
/// the same machine (and container), different across machines and reboots.
std::string host_identity();

}  // namespace chorus
