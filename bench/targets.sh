#!/usr/bin/env bash
# bench/targets.sh [chorus-build-dir]: measures issue 3's targets on this machine and checks
# them. Six bench/compare.py runs (about 20-25 minutes on 2 cores), then bench/targets.py.
# Every cell is the median of 5 interleaved runs per peer: with 3, one noisy run in a
# cell's three decided it, and the same cell moved by 30% between runs of this script.
#   shm    all 8 collectives, 2 and 4 ranks, Chorus / Open MPI / Gloo, 16 B..64 MiB (x4),
#          200 timed iterations below 4 MiB
#   tiny   the same against Open MPI for 16 B..4 KiB, 20000 timed iterations: 200 calls of
#          0.3 us last 60 us in all, so one preemption or late wake-up (50-150 us here)
#          decided a cell (the first size of a run most often); these replace shm's cells
#   small  all-reduce 8 B, as tiny
#   tcp    CHORUS_TRANSPORT=tcp against Gloo, 1..64 MiB
#   eight  8 ranks on the 2 cores against Open MPI, 32 B..8 MiB, 200 iterations; its
#          32 B..8 KiB cells again with 5000 (eight-tiny), which replace them. From 32 B, so
#          that every rank's share of a sharded collective holds at least one float (16 B is
#          0 elements per rank at 8 ranks: both libraries return at once and the cell would
#          time a no-op)
# Output: bench/results/<stamp>-targets.md (+ the compare reports it names).
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
"${compare[@]}" --min 16 --max 64M --factor 4 --repeat 5 --iters 200 --warmup 20 \
  --json "$work/shm.json" >/dev/null || failed=1
"${compare[@]}" --peers chorus,ompi --min 16 --max 4K --factor 4 --repeat 5 --iters 20000 \
  --warmup 2000 --json "$work/tiny.json" >/dev/null || failed=1
"${compare[@]}" --collectives allreduce --min 8 --max 8 --iters 20000 --warmup 2000 --repeat 5 \
  --json "$work/small.json" >/dev/null || failed=1
"${compare[@]}" --transport tcp --peers chorus,gloo --min 1M --max 64M --factor 4 --repeat 5 \
  --json "$work/tcp.json" >/dev/null || failed=1
"${compare[@]}" --ranks 8 --peers chorus,ompi --min 32 --max 8M --factor 4 --repeat 5 \
  --iters 200 --warmup 20 --json "$work/eight.json" >/dev/null || failed=1
"${compare[@]}" --ranks 8 --peers chorus,ompi --min 32 --max 8K --factor 4 --repeat 5 \
  --iters 5000 --warmup 500 --json "$work/eight-tiny.json" >/dev/null || failed=1
files=()  # in this order: a later file's cell replaces an earlier's
for f in shm tiny small tcp eight eight-tiny; do
  files+=("$out/$stamp-targets-$f.json")
  cp "$work/$f.json" "${files[-1]}"
done
python3 "$root/bench/targets.py" "${files[@]}" \
  | tee "$out/$stamp-targets.md"
if [ "$failed" != 0 ]; then
  echo "targets.sh: some runs failed (see '# failed runs' above and the compare reports)" >&2
  exit 1
fi
