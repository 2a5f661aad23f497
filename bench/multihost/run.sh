#!/usr/bin/env bash
# bench/multihost/run.sh [BUILD] [OUT]: Chorus across two simulated hosts (scripts/hosts.sh)
# joined by links shaped to 2 Gbit/s, beside the link itself and Open MPI on the same hosts.
# For 1, 2 and 4 ranks per host (RANKS="1 2" for fewer), four kinds of jobs on the same hosts:
#   0  the link with nothing on top (link.py: a simultaneous two-way TCP stream, GB/s per
#      direction, and the round trip of 8 bytes), run from host0 to host1;
#   1  chorus-perf --tune OUT/r<R>/tuning.txt: the links inside and between the hosts;
#   2  chorus-perf with that file (CHORUS_TUNING_FILE): all-reduce, broadcast, all-gather and
#      reduce-scatter, 8 B and 4-64 MiB;
#   3  with COMPARE="ALGO ..." (e.g. "striped hierarchical ring"), the all-gather and
#      reduce-scatter at 4-64 MiB with each ALGO asked for by name (-a), the algorithms taking
#      turns, REPEAT rounds (default 3); OUT/r<R>/compare.txt lists these jobs;
#   4  Open MPI's mpi_collectives (bench/peers, built by bench/compare.py into PEER_BUILD,
#      default build-bench/peers)
#      over the same sizes, mpirun in the outsider namespace with agent.sh as its remote shell;
#      OMPI=0 leaves it out.
# COLLECTIVES="allgather reducescatter" limits jobs 2 (default: all-reduce, broadcast,
# all-gather and reduce-scatter).
# Prints the markdown report (bus bandwidth against the two-way stream, 8 B against the round
# trip) and keeps the raw outputs in OUT (default: a temporary directory, removed).
# Needs root (network namespaces). Run it on a quiet machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="${2:-}"
if [ -z "$out" ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
mpi_bin="${PEER_BUILD:-$root/build-bench/peers}/mpi_collectives"
ompi=${OMPI:-1}
if [ "$ompi" != 0 ]; then
  if [ ! -x "$mpi_bin" ]; then
    echo "run.sh: build the peers first (bench/setup-peers.sh), or set OMPI=0" >&2
    exit 2
  fi
  mpi_bin="$(realpath "$mpi_bin")"  # mpirun starts it in the hosts' namespaces, from another cwd
fi
perf="$build/tools/chorus-perf/chorus-perf"
sizes=(-b 4M -e 64M -f 4 -n 5 -w 1)
small=(-b 8 -e 8 -n 2000 -w 100)
read -r -a collectives <<<"${COLLECTIVES:-allreduce broadcast allgather reducescatter}"
read -r -a compared <<<"${COMPARE:-}"

for ranks in ${RANKS:-1 2 4}; do
  dir="$out/r$ranks"
  mkdir -p "$dir"
  flag="$dir/flag"
  waiter=(sh -c 'while [ ! -e "$0" ]; do sleep 0.2; done' "$flag")
  tuned=(env CHORUS_TUNING_FILE="$dir/tuning.txt" "$perf")
  jobs=("${waiter[@]}" --then "$perf" --tune "$dir/tuning.txt" --then)
  for c in "${collectives[@]}"; do
    jobs+=("${tuned[@]}" -t "$c" -c 0 "${sizes[@]}" --then "${tuned[@]}" -t "$c" -c 0 "${small[@]}"
      --then)
  done
  # The interleaved comparison: job index, algorithm, round, collective per line.
  last=$((2 + 2 * ${#collectives[@]}))
  : >"$dir/compare.txt"
  for ((round = 1; round <= ${REPEAT:-3} && ${#compared[@]} > 0; ++round)); do
    for algo in "${compared[@]}"; do
      for c in allgather reducescatter; do
        jobs+=("${tuned[@]}" -t "$c" -c 0 "${sizes[@]}" -a "$algo" --then)
        echo "$last $algo $round $c" >>"$dir/compare.txt"
        last=$((last + 1))
      done
    done
  done
  jobs+=("${waiter[@]}")
  # The outsider: the link during job 0, Open MPI during the last job; each then frees its
  # job's waiting ranks.
  during="set -e; cd '$dir'
    if [ \"\$HOSTS_JOB\" = 0 ]; then
      set -- \$HOSTS_ADDRS; a1=\$2; set -- \$HOSTS_NETNS
      ip netns exec \"\$2\" python3 '$here/link.py' serve 5201 & server=\$!
      ip netns exec \"\$1\" python3 '$here/link.py' measure \"\$a1\" 5201 >link.json
      wait \$server; touch '$flag'; sleep 1; rm -f '$flag'
    elif [ \"\$HOSTS_JOB\" = $last ] && [ $ompi = 0 ]; then
      touch '$flag'
    elif [ \"\$HOSTS_JOB\" = $last ]; then
      trap \"touch '$flag'\" EXIT  # a failed Open MPI run frees the waiting ranks too
      set -- \$HOSTS_ADDRS; a0=\$1; a1=\$2
      for c in ${collectives[*]}; do
        for s in '${sizes[*]}' '${small[*]}'; do
          mpirun --allow-run-as-root --oversubscribe --bind-to none \
            --mca plm_rsh_agent '$here/agent.sh' --mca btl tcp,vader,self \
            --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
            --host \"\$a0:$ranks,\$a1:$ranks\" -np $((2 * ranks)) '$mpi_bin' -t \$c \$s \
            >>ompi.txt 2>>ompi.err
        done
      done
      touch '$flag'
    fi"
  "$root/scripts/hosts.sh" --hosts 2 --ranks-per-host "$ranks" --rate 2gbit --timeout 900 \
    --chorusrun "$build/tools/chorusrun/chorusrun" --logs "$dir/logs" --quiet \
    --during "$during" -- "${jobs[@]}"
done
python3 "$here/report.py" "$out"
