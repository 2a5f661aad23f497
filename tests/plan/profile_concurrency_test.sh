#!/usr/bin/env bash
# The compute profile's concurrency (registered by CMakeLists.txt):
#   profile_concurrency_test.sh CHORUSRUN CHORUS_TRAIN CHORUS_PLAN
# chorusrun -n 2 chorus-train --write-compute-profile: both ranks profile at once, rank 0
# alone prints and writes the profile, with "concurrency 2"; chorus-plan reads it without a
# warning at 2 ranks per host and warns, naming both numbers, at 4 (and with a one-process
# profile, "concurrency 1", at 2).
set -euo pipefail
run="$1"
train="$2"
plan="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
model=(--layers 2 --hidden 32 --heads 4 --seq-len 32)
small=(--model gpt "${model[@]}" --batch 2)

"$run" -n 2 --timeout 100 "$train" "${small[@]}" --write-compute-profile "$work/two" \
  >"$work/two.out" || fail "the 2-rank profile exited with $?"
cat "$work/two"
grep -q "^concurrency 2$" "$work/two" || fail "no 'concurrency 2' line"
[ "$(grep -c '^hidden ' "$work/two.out")" -eq 1 ] || fail "the profile not printed once"
[ "$(grep -c '^layer [01] ' "$work/two")" -eq 2 ] || fail "not 2 layer lines"
grep -q "^at 1 " "$work/two" || fail "no 'at 1' line"
grep -q "^optimizer_ns_per_parameter " "$work/two" || fail "no optimizer line"

planned() {  # planned NAME PROFILE RANKS_PER_HOST: chorus-plan's stdout and stderr
  "$plan" "${model[@]}" --global-batch 4 --ranks-per-host "$3" --compute-profile "$2" \
    --top 2 >"$work/$1.plan" 2>"$work/$1.err" || fail "chorus-plan ($1) exited with $?"
  cat "$work/$1.err"
  grep -q "chorus-train" "$work/$1.plan" || fail "no plan ($1)"
}
planned same "$work/two" 2
[ ! -s "$work/same.err" ] || fail "a warning for a profile of the plan's concurrency"
planned more "$work/two" 4
grep -qF "chorus-plan: warning: the compute profile was taken with 2 processes computing at \
once, the plan has 4 ranks per host" "$work/more.err" || fail "no warning at 4 ranks per host"
grep -qF "too low" "$work/more.err" || fail "the warning does not say 'too low'"

"$train" "${small[@]}" --write-compute-profile "$work/one" >/dev/null ||
  fail "the one-process profile exited with $?"
grep -q "^concurrency 1$" "$work/one" || fail "no 'concurrency 1' line"
planned alone "$work/one" 2
grep -qF "taken with 1 process computing at once, the plan has 2 ranks" "$work/alone.err" ||
  fail "no warning for a one-process profile at 2 ranks per host"
echo "PASS"
