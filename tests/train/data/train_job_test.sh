#!/usr/bin/env bash
# Black-box tests of chorus-train under chorusrun (registered by CMakeLists.txt):
#   train_job_test.sh CHORUSRUN CHORUS_TRAIN mlp|lstm|resume|alternate
# mlp/lstm: a short run exits 0, its loss falls, the replicas agree and the test metrics are
# printed; mlp also runs as a single rank without chorusrun. resume: a run interrupted at
# step 10 and resumed from its checkpoint prints the same per-step losses (9 significant
# digits) as an uninterrupted run. alternate: --alternate-sync reports the medians of both
# kinds of step and refuses --no-sync.
set -euo pipefail
run="$1"
train="$2"
mode="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# Prints "step loss" for every progress line of a log.
losses() { awk '$1 == "epoch" { print $4, $6 }' "$1"; }

check_run() {  # log: exit status already checked; loss fell, replicas equal, metrics printed
  local log="$1"
  cat "$log"
  local first last
  first="$(losses "$log" | head -1 | cut -d' ' -f2)"
  last="$(losses "$log" | tail -1 | cut -d' ' -f2)"
  [ -n "$first" ] && [ -n "$last" ] || fail "no progress lines"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not fall: $first -> $last"
  grep -q "replicas equal: yes" "$log" || fail "replicas differ or were not checked"
  grep -q "^test: " "$log" || fail "no test metrics"
}

case "$mode" in
  mlp)
    "$run" -n 2 --timeout 100 "$train" --model mlp --steps 20 --log-every 5 --hidden 256 \
      --layers 2 >"$work/log" || fail "chorusrun -n 2 chorus-train exited with $?"
    check_run "$work/log"
    "$train" --model mlp --steps 10 --log-every 5 --hidden 128 --layers 1 --no-eval \
      >"$work/single" || fail "chorus-train as a single rank exited with $?"
    cat "$work/single"
    grep -q "1 ranks" "$work/single" || fail "single rank run did not run as 1 rank"
    ;;
  lstm)
    "$run" -n 2 --timeout 100 "$train" --model lstm --steps 12 --log-every 4 --hidden 64 \
      --batch 16 --lr 0.01 >"$work/log" || fail "chorusrun -n 2 chorus-train exited with $?"
    check_run "$work/log"
    grep -q "perplexity" "$work/log" || fail "no perplexity"
    ;;
  resume)
    common=(--model mlp --log-every 1 --hidden 128 --layers 2 --no-eval)
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --steps 20 >"$work/full" ||
      fail "uninterrupted run exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --steps 10 --checkpoint "$work/ck.pt" \
      >"$work/first" || fail "first half exited with $?"
    [ -f "$work/ck.pt" ] || fail "no checkpoint written"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --steps 20 --checkpoint "$work/ck.pt" \
      --resume >"$work/second" || fail "resumed run exited with $?"
    cat "$work/full" "$work/second"
    grep -q "resumed from" "$work/second" || fail "the second run did not resume"
    diff <(losses "$work/full" | awk '$1 > 10') <(losses "$work/second") ||
      fail "resumed losses differ from the uninterrupted run"
    [ "$(losses "$work/second" | wc -l)" -eq 10 ] || fail "expected 10 resumed steps"
    ;;
  alternate)
    "$run" -n 3 --timeout 100 "$train" --model mlp --steps 16 --alternate-sync 2 --hidden 128 \
      --layers 1 --no-eval --log-every 8 >"$work/log" || fail "--alternate-sync run exited with $?"
    cat "$work/log"
    grep -Eq "^summary steps=16 .*step_ms_median=[0-9.]+ unsynced_step_ms_median=[0-9.]+$" \
      "$work/log" || fail "no summary with both medians"
    grep -q "replicas equal: not checked" "$work/log" || fail "replicas should not be checked"
    if "$train" --model mlp --steps 2 --alternate-sync 2 --no-sync >"$work/bad" 2>&1; then
      fail "--alternate-sync with --no-sync was accepted"
    fi
    cat "$work/bad"
    grep -q "cannot be combined with --no-sync" "$work/bad" || fail "unclear error: $(cat "$work/bad")"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS $mode"
