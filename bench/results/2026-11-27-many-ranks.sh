#!/usr/bin/env bash
# Many ranks on this machine: start-up + an 8 B all-reduce + exit, and the 8 B all-reduce and
# barrier times, against the number of ranks, for one Chorus build (and Open MPI's
# mpi_collectives under mpirun --oversubscribe when given).
#
# usage: bench/results/2026-11-27-many-ranks.sh LABEL BIN_DIR "16 64 ..." [MPI_COLLECTIVES]
#   BIN_DIR holds chorusrun and chorus-perf. Prints one table row per rank count:
#   | build | ranks | job s | all-reduce 8 B us | barrier us |
#   job s = wall time of `chorusrun -n N chorus-perf -t allreduce -b 8 -e 8 -n 10 -w 2`
#   (start-up, warm-up, 10 timed all-reduces, exit); a job stopped by its 300 s limit
#   prints "timeout".
set -uo pipefail
label="$1"
bin="$2"
ranks="$3"
mpi="${4:-}"
limit=300

# Runs the command, prints "<seconds> <time column of the last table row>".
timed_row() {
  local start end out
  start=$(date +%s.%N)
  out=$(timeout "$limit" "$@" 2>/dev/null)
  local rc=$?
  end=$(date +%s.%N)
  if [ "$rc" -ne 0 ]; then
    echo "timeout -"
    return
  fi
  local time
  time=$(printf '%s\n' "$out" | grep -v '^#' | awk 'NF >= 6 {t = $0} END {print t}')
  echo "$(echo "$end - $start" | bc -l | xargs printf '%.2f') $time"
}

for n in $ranks; do
  read -r job row <<<"$(timed_row "$bin/chorusrun" -n "$n" "$bin/chorus-perf" -t allreduce \
    -b 8 -e 8 -n 10 -w 2)"
  allreduce=$(echo "$row" | awk '{print $6}')
  read -r _ brow <<<"$(timed_row "$bin/chorusrun" -n "$n" "$bin/chorus-perf" -t barrier \
    -n 10 -w 2)"
  barrier=$(echo "$brow" | awk '{print $6}')
  echo "| $label | $n | $job | ${allreduce:--} | ${barrier:--} |"
  if [ -n "$mpi" ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    read -r mjob mrow <<<"$(timed_row mpirun --oversubscribe --allow-run-as-root --bind-to none \
      -np "$n" "$mpi" -t allreduce -b 8 -e 8 -n 10 -w 2)"
    echo "| Open MPI | $n | $mjob | $(echo "$mrow" | awk '{print $4}') | - |"
  fi
done
