#!/usr/bin/env bash
# tests/slurm/cleanup.sh: scripts/slurm.sh passes its command's exit status on and leaves
# nothing behind, whether the command fails or the script is stopped by SIGINT, SIGTERM or
# SIGKILL (then its watcher cleans up): no namespace of its own, no daemon, no task, no state
# directory. Exit status 77 (ctest's skip) where Slurm cannot be started.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
namespace_prefix=chorusslurm
harness=("$root/scripts/slurm.sh" --nodes 2 --cpus 2 --timeout 120)
# shellcheck source=../support/harness_cleanup.sh
source "$root/tests/support/harness_cleanup.sh"

skip_unless_runs
fails_with 3 -- srun -n 4 sh -c 'exit 3'
# A job step of 4 tasks sleeping 60 s, beside slurmctld and the slurmds.
for signal in INT TERM KILL; do stopped_by "$signal" 4 -- srun -n 4 sleep 60; done
