#!/usr/bin/env bash
# Black-box tests of chorus-train's pipeline tools (registered by CMakeLists.txt):
#   pipeline_tools_job_test.sh CHORUSRUN CHORUS_TRAIN CHORUS_PLAN MODE
# MODE: svg|synthetic|partition|profile
# svg: --pp-dry-run --timeline-svg draws the verifier's schedule (interleaved p 4, m 4, v 2):
# 16 boxes per rank, in four rows, each rank's in order and none overlapping the next; a real
# pp 2 run's --timeline-svg draws its last step's 8 computations per rank the same way.
# synthetic: pp 2 with --synthetic-compute 20 trains (loss 0) and its median step lasts at
# least the sleeps of one stage (m forwards and backwards of its blocks, by the planner's
# FLOP counts); pp 2 x tp 2 too (the tp all-reduces real); --synthetic-compute with
# --sequence-parallel is refused.
# partition: --partition 3,1 gives those blocks; a list that does not sum to the blocks and
# fewer blocks than stages are refused naming the numbers; --partition time with a compute
# profile whose first block is slow gives it a stage of its own; --partition time without
# one profiles on rank 0 and trains at pp 2.
# profile: --write-compute-profile writes a profile with a line per block, the times at the
# smaller micro-batches 1 and 2, the backward under recomputation at each size and the
# optimizer's, which chorus-plan --compute-profile reads.
set -euo pipefail
run="$1"
train="$2"
plan="$3"
mode="$4"
# shellcheck source=job_helpers.sh
source "$(dirname "$0")/job_helpers.sh"  # also makes $work, removed on exit
small=(--model gpt --layers 4 --hidden 32 --heads 4 --seq-len 32 --batch 8 --log-every 1
  --no-eval --eval-every 0)

# check_svg FILE RANKS BOXES: FILE has RANKS rows of BOXES boxes each, every row's boxes in
# time order and none overlapping the next.
check_svg() {
  python3 - "$@" <<'PY' || fail "bad SVG $1"
import re, sys
path, ranks, per_rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
svg = open(path).read()
rows = {}
for attrs in re.findall(r'<rect class="action"([^>]*)>', svg):
    a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
    rows.setdefault(a["data-rank"], []).append(a)
assert sorted(rows) == [str(r) for r in range(ranks)], sorted(rows)
for rank, boxes in rows.items():
    assert len(boxes) == per_rank, (rank, len(boxes))
    assert len({b["y"] for b in boxes}) == 1, rank
    for a, b in zip(boxes, boxes[1:]):
        assert float(a["data-end"]) <= float(b["data-start"]), (rank, a, b)
        # coordinates are rounded to the thousandth of a pixel
        assert float(a["x"]) + float(a["width"]) <= float(b["x"]) + 2e-3, (rank, a, b)
print(path, "has", ranks, "rows of", per_rank, "boxes")
PY
}

case "$mode" in
  svg)
    "$train" --model gpt --layers 8 --pp 4 --schedule interleaved --micro-batches 4 \
      --pp-dry-run --timeline-svg "$work/dry.svg" >"$work/dry" || fail "dry run exited with $?"
    check_svg "$work/dry.svg" 4 16
    grep -q "interleaved: p 4, m 4, v 2; bubble 0.2727" "$work/dry.svg" || fail "no title"
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --pp 2 --micro-batches 4 --steps 3 \
      --timeline-svg "$work/run.svg" >"$work/run" || fail "pp 2 exited with $?"
    cat "$work/run"
    check_svg "$work/run.svg" 2 8
    ;;
  synthetic)
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --pp 2 --micro-batches 4 --steps 4 \
      --synthetic-compute 20 >"$work/syn" || fail "synthetic pp 2 exited with $?"
    cat "$work/syn"
    [ "$(losses "$work/syn" | awk '$2 != 0' | wc -l)" -eq 0 ] || fail "a loss is not 0"
    # 2 blocks of b 2 per stage: 2 x 2 units forward, twice that backward, 4 micro-batches.
    awk '/^summary/ { split($4, f, "="); exit !(f[2] >= 4 * 3 * 2 * 2 * 20) }' "$work/syn" ||
      fail "the step is shorter than one stage's sleeps"
    "$run" -n 4 --timeout 100 "$train" "${small[@]}" --pp 2 --tp 2 --micro-batches 2 --steps 2 \
      --synthetic-compute 5 >"$work/syntp" || fail "synthetic pp 2 x tp 2 exited with $?"
    grep -q "^summary" "$work/syntp" || fail "no summary"
    refused syn_sp \
      "--synthetic-compute '5' is not valid: cannot be combined with --sequence-parallel" \
      "$train" "${small[@]}" --tp 2 --sequence-parallel --synthetic-compute 5
    ;;
  partition)
    dry=(--model gpt --layers 4 --pp 2 --micro-batches 2 --pp-dry-run)
    "$train" "${dry[@]}" --partition 3,1 >"$work/list" || fail "--partition 3,1 exited with $?"
    grep -q "^blocks per virtual stage: 3 1$" "$work/list" || fail "not 3 1"
    refused sum "layers per stage [3, 3] must be positive and sum to 4" \
      "$train" "${dry[@]}" --partition 3,3
    refused few "pipeline partition: 2 layers for 4 stages; every stage needs a layer" \
      "$train" --model gpt --layers 2 --pp 4 --micro-batches 4 --pp-dry-run
    printf '%s\n' "hidden 64" "heads 4" "seq 64" "micro_batch 4" "layer_forward_ms 1" \
      "layer_backward_ms 2" "layer 0 9 18" "layer 1 1 2" "layer 2 1 2" "layer 3 1 2" \
      >"$work/slow_first.profile"
    "$train" "${dry[@]}" --partition time --compute-profile "$work/slow_first.profile" \
      >"$work/time" || fail "--partition time exited with $?"
    grep -q "^blocks per virtual stage: 1 3$" "$work/time" || fail "the slow block not alone"
    refused short \
      "--partition time: $work/slow_first.profile has times of 4 blocks for --layers 6" \
      "$train" "${dry[@]}" --layers 6 --partition time --compute-profile "$work/slow_first.profile"
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --pp 2 --micro-batches 2 --steps 2 \
      --partition time >"$work/timed" || fail "--partition time at pp 2 exited with $?"
    cat "$work/timed"
    grep -q "pp 2 (1f1b, blocks [1-3]/[1-3])" "$work/timed" || fail "no blocks line"
    ;;
  profile)
    "$train" "${small[@]}" --micro-batches 2 --write-compute-profile "$work/p" >"$work/out" ||
      fail "--write-compute-profile exited with $?"
    cat "$work/p"
    [ "$(grep -c '^layer [0-3] ' "$work/p")" -eq 4 ] || fail "not 4 layer lines"
    grep -q "^micro_batch 4$" "$work/p" || fail "not micro-batch 4"
    [ "$(grep -c '^at [12] ' "$work/p")" -eq 2 ] || fail "not an 'at' line for 1 and for 2"
    [ "$(grep -c '^recompute [124] ' "$work/p")" -eq 3 ] || fail "not a recompute line per size"
    grep -q "^optimizer_ns_per_parameter " "$work/p" || fail "no optimizer line"
    "$plan" --layers 4 --hidden 32 --heads 4 --seq-len 32 --global-batch 8 --ranks-per-host 2 \
      --compute-profile "$work/p" --top 3 >"$work/plan" || fail "chorus-plan exited with $?"
    grep -q "chorus-train" "$work/plan" || fail "no plan"
    ;;
  *)
    fail "unknown mode $mode"
    ;;
esac
echo "PASS: $mode"
