#!/usr/bin/env bash
# bench/ab.sh "NAME=BUILD[:ENV=VALUE] ..." "COLLECTIVES" SIZE REPS RANKS: times builds of Chorus
# against each other and Open MPI in one run, interleaved (each repetition runs every build once,
# then Open MPI), and prints the median (range) in ns per call of each. One run is
# `chorus-perf -t C -b SIZE -e SIZE -n N -w 2000 -c 0` (N from the environment, default 200000)
# under `chorusrun -n RANKS`; Open MPI's is build-bench/peers/mpi_collectives (PEER_BUILD).
# The time per call is the finer of two printed values: SIZE / algbw (algbw has two decimals, so
# 16 B comes out in steps of 94.1, 100.0, 106.7 ns) and the time column (two decimals of a
# microsecond, 10 ns steps): whichever is the larger number of steps. Run it on a quiet machine.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mpi_bin="$(realpath "${PEER_BUILD:-$root/build-bench/peers}")/mpi_collectives"
[ $# -ge 1 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
read -r -a variants <<<"$1"
collectives=${2:-"broadcast scatter gather reduce allgather"}
size=${3:-64}
reps=${4:-5}
ranks=${5:-2}
iters=${N:-200000}

# ns per call of one run from the first result line: SIZE over the algbw column (GB/s, column
# $2) or the time column (us, column $1), whichever is printed with more significant steps.
ns_from() {
  grep -v '^#' | awk -v s="$size" -v tc="$1" -v bc="$2" 'NF>5 {
    by_time = $tc * 1000; by_bw = $bc > 0 ? s / $bc : by_time
    printf "%.1f\n", ($tc * 100 >= $bc * 100) ? by_time : by_bw; exit }'
}

chorus_once() {  # BUILD ENV COLLECTIVE
  env $2 timeout 120 "$1/tools/chorusrun/chorusrun" -n "$ranks" "$1/tools/chorus-perf/chorus-perf" \
    -t "$3" -b "$size" -e "$size" -n "$iters" -w 2000 -c 0 -d float32 -o sum 2>/dev/null | ns_from 6 7
}

ompi_once() {  # COLLECTIVE
  timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$ranks" "$mpi_bin" \
    -t "$1" -b "$size" -e "$size" -n "$iters" -w 2000 2>/dev/null | ns_from 4 5
}

for c in $collectives; do
  declare -A times=()
  for _ in $(seq "$reps"); do
    for v in "${variants[@]}"; do
      name=${v%%=*} rest=${v#*=}
      build=${rest%%:*} envs=""
      [[ "$rest" == *:* ]] && envs=${rest#*:}
      times[$name]+="$(chorus_once "$build" "$envs" "$c") "
    done
    times[ompi]+="$(ompi_once "$c") "
  done
  for k in $(printf '%s\n' "${!times[@]}" | sort); do
    summary=$(printf '%s\n' ${times[$k]} | sort -g |
      awk '{a[NR]=$1} END {print a[int((NR+1)/2)], "(" a[1] "-" a[NR] ")"}')
    echo "$c $size n=$ranks $k: $summary ns"
  done
  unset times
done
