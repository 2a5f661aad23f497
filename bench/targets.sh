#!/usr/bin/env bash
# bench/targets.sh [chorus-build-dir]: measures issue 3's targets on this machine and checks
# them. Four bench/compare.py runs (about 20 minutes on 2 cores), then bench/targets.py:
#   shm    all 8 collectives, 2 and 4 ranks, Chorus / Open MPI / Gloo, 16 B..64 MiB (x4)
#          (200 timed iterations below 4 MiB: 20 calls of under a microsecond last a few
#          microseconds in all, and one scheduler tick then decides the cell)
#   small  all-reduce 8 B with long warm-up (the first size of a short run is not warm)
#   tcp    CHORUS_TRANSPORT=tcp against Gloo, 1..64 MiB
#   eight  8 ranks on the 2 cores against Open MPI, 16 B..16 MiB
# Output: bench/results/<stamp>-targets.md (+ the compare reports and charts it names).
# Run it on a quiet machine: anything else running shows up in the numbers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
stamp="$(date +%Y-%m-%d-%H%M%S)"
out="$root/bench/results"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
compare=(python3 "$root/bench/compare.py" --chorus-build "$build")
# A run that fails (compare.py lists it and exits 1) leaves its cell with fewer runs; the
# other parts still run and the report is still written, then this script exits 1.
failed=0
"${compare[@]}" --min 16 --max 64M --factor 4 --repeat 3 --iters 200 --warmup 20 \
  --json "$work/shm.json" >/dev/null || failed=1
"${compare[@]}" --collectives allreduce --min 8 --max 8 --iters 2000 --warmup 200 --repeat 5 \
  --json "$work/small.json" >/dev/null || failed=1
"${compare[@]}" --transport tcp --peers chorus,gloo --min 1M --max 64M --factor 4 --repeat 3 \
  --json "$work/tcp.json" >/dev/null || failed=1
"${compare[@]}" --ranks 8 --peers chorus,ompi --min 16 --max 16M --factor 4 --repeat 3 \
  --iters 200 --warmup 20 --json "$work/eight.json" >/dev/null || failed=1
for f in shm small tcp eight; do cp "$work/$f.json" "$out/$stamp-targets-$f.json"; done
python3 "$root/bench/targets.py" "$out/$stamp-targets-"{shm,small,tcp,eight}.json \
  | tee "$out/$stamp-targets.md"
if [ "$failed" != 0 ]; then
  echo "targets.sh: some runs failed (see '# failed runs' above and the compare reports)" >&2
  exit 1
fi
