#!/usr/bin/env bash
# tests/slurm/perf_job.sh CHORUSRUN CHORUS_PERF: chorus-perf under a Slurm cluster of 2 nodes
# with 2 CPUs each (scripts/slurm.sh), every collective with its result check on:
#  1. `srun -n 4 chorus-perf`: the ranks find their rank, world size and store in Slurm's
#     variables alone; the report places ranks 0-1 on node0 and 2-3 on node1;
#  2. `srun -N 1 -n 2`: one node, its store on loopback;
#  3. `sbatch chorusrun.sbatch chorus-perf`: one chorusrun per node inside an allocation.
# Exit status 77 (ctest's skip) where Slurm cannot be started.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: perf_job.sh CHORUSRUN CHORUS_PERF" >&2; exit 2; }
chorusrun=$1 perf=$2
test_name=slurm_perf
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

# The ranks' environment carries no launcher variables but Slurm's.
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT CHORUS_STORE_ADDR CHORUS_STORE_PORT
export CHORUS_AUTH_TOKEN=slurm-perf-secret
PATH="$(dirname "$chorusrun"):$PATH"
sweep=(-t all -d float32 -b 8 -e 64K -f 16 -n 2 -w 1 -c 1)
cd "$logs" || exit 1
export TESTS_DIR="$here"
run_slurm --nodes 2 --cpus 2 --timeout 150 -- sh -c '
  srun -n 4 "$@" >srun.log 2>&1 || { echo "srun -n 4 failed"; exit 1; }
  srun -N 1 -n 2 "$@" >one_node.log 2>&1 || { echo "srun -N 1 -n 2 failed"; exit 1; }
  "$TESTS_DIR/sbatch_wait.sh" --output=chorusrun.log "$TESTS_DIR/chorusrun.sbatch" "$@"
' sh "$perf" "${sweep[@]}"

# check_report LOG HOST... : rank r of the report in LOG runs on the r-th HOST, and the report
# covers every collective.
check_report() {
  local log=$1 r=0
  shift
  for host in "$@"; do
    grep -Eq "Rank +$r Pid +[0-9]+ on $host\$" "$log" || fail "$log does not place rank $r on $host"
    r=$((r + 1))
  done
  local collectives
  collectives=$(grep -c '^# Collective:' "$log")
  [ "$collectives" -eq 11 ] || fail "$log has $collectives collectives, not 11"
}
check_report srun.log node0 node0 node1 node1
check_report one_node.log node0 node0
check_report chorusrun.log node0 node0 node1 node1
echo "$test_name: srun -n 4, srun -N 1 and chorusrun in an allocation: every collective correct"
