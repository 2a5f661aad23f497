#!/usr/bin/env bash
# Many ranks on one host with the shared-memory budget: per rank count, the wall time of a job
# (start-up, a barrier, 12 all-reduces of 8 B, exit) and its 8 B all-reduce time; then, from a
# second, longer job once every rank is connected, the job's shared memory (each segment once)
# and the sockets and shared mappings of its last rank; then the same for Open MPI, when given.
# A job stopped by its limit prints "timeout", one that exits with an error "failed(rc,s)".
#
# usage: bench/results/2026-11-27-many-ranks-budget.sh LABEL BIN_DIR "64 128 ..." [MPI_COLLECTIVES]
#   BIN_DIR holds chorusrun and chorus-perf. Prints one table row per rank count:
#   | build | ranks | job s | all-reduce 8 B us | shared MiB | sockets/rank | shared maps/rank |
#   (Open MPI's job: mpirun --oversubscribe --bind-to none -np N MPI_COLLECTIVES, built from
#   bench/peers/mpi_collectives.c with mpicc -O2 ... -lm)
set -uo pipefail
label="$1"
bin="$2"
ranks="$3"
mpi="${4:-}"
limit=300

# Shared memory of the processes running RANK_BINARY (each segment once, by inode: anonymous
# memory files and /dev/shm files they map), in MiB; their count; the sockets and shared
# mappings of the last one started.
job_memory() {
  python3 - "$1" <<'PY'
import os, re, sys
pids = [p for p in os.listdir("/proc") if p.isdigit()]
mine = []
for p in pids:
    try:
        if open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0].decode() == sys.argv[1]:
            mine.append(int(p))
    except OSError:
        pass
if not mine:
    sys.exit(0)
seen, maps_of_last, last = {}, 0, max(mine)
for p in mine:
    try:
        for line in open(f"/proc/{p}/maps"):
            f = line.split()
            if len(f) < 6 or f[1] != "rw-s" or not (f[5].startswith("/memfd:") or
                                                    f[5].startswith("/dev/shm/")):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            seen[f[4]] = max(seen.get(f[4], 0), hi - lo)
            maps_of_last += p == last
    except OSError:
        pass
try:
    sockets = sum(os.readlink(f"/proc/{last}/fd/{d}").startswith("socket:")
                  for d in os.listdir(f"/proc/{last}/fd"))
except OSError:
    sockets = "-"
print(f"{sum(seen.values()) / 2**20:.1f} {len(mine)} {sockets} {maps_of_last}")
PY
}

# Wall time of a job and the time column of its last table row: "<seconds> <row>", or
# "timeout"/"failed(rc)" and "-".
timed_job() {
  local out start end rc row
  out=$(mktemp)
  start=$(date +%s.%N)
  timeout "$limit" "$@" >"$out" 2>/dev/null
  rc=$?
  end=$(date +%s.%N)
  row=$(grep -v '^#' "$out" | awk 'NF >= 6 {t = $0} END {print t}')
  rm -f "$out"
  if [ "$rc" -eq 124 ]; then
    echo "timeout -"
  elif [ "$rc" -ne 0 ]; then
    echo "failed($rc,$(echo "$end - $start" | bc -l | xargs printf '%.0f')s) ${row:--}"
  else
    echo "$(echo "$end - $start" | bc -l | xargs printf '%.2f') $row"
  fi
}

# The memory of a job that runs long enough to be looked at: started in the background, taken
# (job_memory RANK_BINARY) one second after its table header (every rank connected), stopped.
probe_memory() {
  local rank_binary="$1"
  shift
  local out pid memory="- - - -"
  out=$(mktemp)
  timeout "$limit" "$@" >"$out" 2>/dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q "size" "$out"; then
      sleep 1
      memory=$(job_memory "$rank_binary")
      break
    fi
    sleep 0.5
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -f "$out"
  echo "${memory:-- - - -}"
}

for n in $ranks; do
  read -r job row <<<"$(timed_job "$bin/chorusrun" -n "$n" "$bin/chorus-perf" -t allreduce \
    -b 8 -e 8 -n 10 -w 2)"
  read -r mib _ sockets maps <<<"$(probe_memory "$bin/chorus-perf" "$bin/chorusrun" -n "$n" \
    "$bin/chorus-perf" -t allreduce -b 8 -e 8 -n 100000000 -w 2)"
  echo "| $label | $n | $job | $(echo "$row" | awk '{print $6}') | $mib | $sockets | $maps |"
  if [ -n "$mpi" ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$n" "$mpi")
    read -r job row <<<"$(timed_job "${mpirun[@]}" -t allreduce -b 8 -e 8 -n 10 -w 2)"
    read -r mib _ sockets maps <<<"$(probe_memory "$mpi" "${mpirun[@]}" -t allreduce -b 8 -e 8 \
      -n 100000000 -w 2)"
    echo "| Open MPI | $n | $job | $(echo "$row" | awk '{print $4}') | $mib | $sockets | $maps |"
  fi
done
