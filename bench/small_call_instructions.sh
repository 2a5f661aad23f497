#!/usr/bin/env bash
# bench/small_call_instructions.sh BUILD_DIR [OUT_DIR]: instructions per small blocking call
# under callgrind (a count that the machine's load changes far less than a timing).
#
# For each collective of COLLECTIVES (default: broadcast scatter gather reduce allreduce
# allgather) it runs `chorusrun -n RANKS valgrind --tool=callgrind chorus-perf -t C -b BYTES
# -e BYTES -n ITERS -w WARMUP -c 0`, collecting only inside chorus::perf::run_once (the calls
# themselves), and prints each rank's instructions per call. Polling a peer's flag that is
# not there yet, and the arena's watcher passes (one per millisecond), are counted too: they
# depend on how the processes were scheduled, so a collective whose ranks wait on each other
# (all-reduce, all-gather) varies from run to run; look at the callgrind files. Defaults:
# RANKS=2 BYTES=64 ITERS=20000 WARMUP=100. The callgrind files stay in OUT_DIR (default: a new
# temporary directory) for callgrind_annotate.
set -euo pipefail
build="${1:?usage: $0 BUILD_DIR [OUT_DIR]}"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
ranks="${RANKS:-2}"
bytes="${BYTES:-64}"
iters="${ITERS:-20000}"
warmup="${WARMUP:-100}"
calls=$((iters + warmup))
collectives="${COLLECTIVES:-broadcast scatter gather reduce allreduce allgather}"

total() {
  callgrind_annotate --threshold=100 "$1" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

echo "collective rank instructions_per_call"
for c in $collectives; do
  rm -f "$out/$c".*
  timeout 600 "$build/tools/chorusrun/chorusrun" -n "$ranks" valgrind --tool=callgrind \
    --toggle-collect='chorus::perf::run_once*' --callgrind-out-file="$out/$c.%q{RANK}" \
    "$build/tools/chorus-perf/chorus-perf" -t "$c" -b "$bytes" -e "$bytes" -n "$iters" \
    -w "$warmup" -c 0 >"$out/$c.log" 2>&1
  for ((r = 0; r < ranks; r++)); do
    f="$out/$c.$r"
    echo "$c $r $(($(total "$f") / calls))"
  done
done
echo "callgrind files: $out"
