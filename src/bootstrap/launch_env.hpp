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
  std::string master_addr;  ///< host of the store
  int master_port = 0;
  std::string source;  ///< "torchrun", "slurm", "openmpi", "pmi"
};

using GetEnv = std::function<const char*(const char*)>;

/// Throws Error(InvalidArgument) naming what is missing or malformed.
LaunchInfo read_launch_env(const GetEnv& getenv_fn);
LaunchInfo read_launch_env();

/// A string identifying this host (hostname plus boot id), equal for every
/// process on the same machine.
std::string host_identity();

}  // namespace chorus
