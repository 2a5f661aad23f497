// Where this process sits in the job, read from the launcher's variables:
// torchrun/chorusrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
// then Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the node list and job id name the
// store), Open MPI
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMI (PMI_RANK, PMI_SIZE).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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
/// - Under Slurm without MASTER_ADDR, the store is on the first host of the step's node
///   list (SLURM_STEP_NODELIST, else SLURM_NODELIST, else SLURM_JOB_NODELIST), where srun
///   starts task 0 (every distribution but `arbitrary`); 127.0.0.1 when the list has one host.
///   Without MASTER_PORT, the port is slurm_store_port(SLURM_JOB_ID, SLURM_STEP_ID).
/// - MASTER_PORT otherwise defaults to 29500 (torchrun's default).
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

/// Slurm's compressed host list (SLURM_JOB_NODELIST's form) in order: entries separated by
/// commas, each a name with bracketed number ranges printed zero-padded to the width of the
/// range's start ("n[1-3,5]" is n1 n2 n3 n5, "n[08-10]" is n08 n09 n10, "r[1-2]-n[1-2]" is
/// r1-n1 r1-n2 r2-n1 r2-n2). Throws Error(InvalidArgument) quoting the list and what is wrong
/// (an empty name, unbalanced brackets, a range that is not numbers or ends below its
/// start, white space, more than max_hosts hosts).
std::vector<std::string> expand_host_list(std::string_view list, std::size_t max_hosts = 1'000'000);

/// The store port of Slurm job step (job, step) when MASTER_PORT is not set:
/// 20000 + (8 * (job mod 12768) + step mod 8) mod 12768, in [20000, 32767] below Linux's
/// ephemeral ports, so that up to 8 concurrent steps of a job, and jobs started one after
/// the other, get ports of their own.
int slurm_store_port(std::uint64_t job_id, std::uint64_t step_id);

/// A string identifying this host: hostname + "/" + the kernel's boot id
/// (hostname alone when the boot id is unreadable). Equal for every process on
/// the same machine (and container), different across machines and reboots.
std::string host_identity();

}  // namespace chorus
