#!/usr/bin/env bash
# Black-box tests of chorus-train --model gpt with every parallel dimension at once, under
# chorusrun at 8 ranks (oversubscribed; registered by CMakeLists.txt):
#   compose_job_test.sh CHORUSRUN CHORUS_TRAIN MODE
# The reference is one process on the global batch (--batch x dp): step s takes the same
# samples at any dp (the sampler deals the epoch round-robin), so its per-step losses are those
# of every layout (fp32, relative 1e-5).
# zero: ZeRO over the dp x cp group with the other dimensions: tp 2 x cp 2 x pp 2 with sequence
# parallelism and ZeRO-1 (dp 1), tp 2 x pp 2 x dp 2 with ZeRO-1 and tp 2 x cp 2 x dp 2 with
# sequence parallelism and ZeRO-2 give the one-process losses; ZeRO-1 with --moe-experts is
# refused with its sentence.
# moe: mixture of experts in 4D layouts: tp 2 x pp 2 x dp 2 x ep 2 (in 2 micro-batches),
# tp 2 x cp 2 x dp 2 x ep 2 and cp 2 x pp 2 x dp 2 x ep 2 give the one-process losses (routing
# groups of 16 tokens, which stay on one cp rank); routing groups spanning cp ranks are refused.
# resume: a checkpoint saved at tp 2 x pp 2 x dp 2 with ZeRO-1 after 3 steps resumes at pp 4 x
# dp 2 without ZeRO, at tp 2 x dp 2 with ZeRO-2 and in one process, each continuing with the
# uninterrupted run's losses; resuming with another global batch is refused.
# zero3: the one checkpoint kind: a checkpoint saved at dp 4 under ZeRO-3 after 3 steps resumes
# at tp 2 x dp 2 without ZeRO and at pp 2 x dp 2 with ZeRO-1, and one saved at tp 2 x dp 2
# without ZeRO resumes under ZeRO-3 at dp 4, each continuing the uninterrupted run's losses.
set -euo pipefail
run="$1"
train="$2"
mode="$3"
# shellcheck source=job_helpers.sh
source "$(dirname "$0")/job_helpers.sh"  # also makes $work, removed on exit
small=(--model gpt --layers 2 --hidden 32 --heads 4 --seq-len 32 --log-every 1 --no-eval
  --eval-every 0)

# layout NAME RANKS DESCRIPTION REFERENCE OPTIONS...: chorus-train OPTIONS at RANKS ranks
# describes itself with DESCRIPTION and prints the per-step losses of the log REFERENCE.
layout() {
  local name="$1" ranks="$2" description="$3" reference="$4"
  shift 4
  "$run" -n "$ranks" --timeout 200 "$train" "$@" >"$work/$name" || fail "$name exited with $?"
  cat "$work/$name"
  grep -qF -- "$description" "$work/$name" || fail "$name: not '$description'"
  same_losses "$work/$name" "$reference" 1e-5
}

# resumes NAME CHECKPOINT RANKS BATCH OPTIONS...: a copy of CHECKPOINT resumed at step 3 by
# chorus-train OPTIONS at RANKS ranks continues the losses of $work/full_after_3.
resumes() {
  local name="$1" checkpoint="$2" ranks="$3" batch="$4"
  shift 4
  mkdir "$work/$name" && cp "$checkpoint"* "$work/$name/"
  "$run" -n "$ranks" --timeout 200 "$train" "${common[@]}" --batch "$batch" --steps 6 "$@" \
    --checkpoint "$work/$name/$(basename "$checkpoint")" --resume >"$work/$name.log" ||
    fail "$name exited with $?"
  cat "$work/$name.log"
  grep -q "resumed from .* at step 3" "$work/$name.log" || fail "$name: no resume"
  same_losses "$work/full_after_3" "$work/$name.log" 1e-5
}

case "$mode" in
  zero)
    common=("${small[@]}" --steps 3)
    "$train" "${common[@]}" --batch 8 >"$work/one8" || fail "one process exited with $?"
    "$train" "${common[@]}" --batch 16 >"$work/one16" || fail "one process exited with $?"
    layout tpcppp 8 "tp 2 (sequence parallel) x cp 2 x dp 1 x pp 2 (1f1b, blocks 1/1) in 2 \
micro-batches x batch 8 (ZeRO-1)" "$work/one8" "${common[@]}" --batch 8 --tp 2 --cp 2 --pp 2 \
      --sequence-parallel --micro-batches 2 --zero 1
    layout tpppdp 8 "tp 2 x dp 2 x pp 2 (1f1b, blocks 1/1) in 2 micro-batches x batch 8 (ZeRO-1)" \
      "$work/one16" "${common[@]}" --batch 8 --tp 2 --pp 2 --micro-batches 2 --zero 1
    layout tpcpdp 8 "tp 2 (sequence parallel) x cp 2 x dp 2 x batch 8 (ZeRO-2)" "$work/one16" \
      "${common[@]}" --batch 8 --tp 2 --cp 2 --sequence-parallel --zero 2
    refused zero1moe "--zero '1' is not valid: cannot be combined with --moe-experts" \
      "$train" --model gpt --steps 2 --zero 1 --moe-experts 2
    ;;
  moe)
    common=("${small[@]}" --steps 3 --moe-experts 4 --moe-capacity dropless --moe-group-tokens 16)
    "$train" "${common[@]}" --batch 16 >"$work/one" || fail "one process exited with $?"
    layout tpppdpep 8 "ep 2; tp 2 x dp 2 x pp 2 (1f1b, blocks 1/1) in 2 micro-batches x batch 8" \
      "$work/one" "${common[@]}" --batch 8 --tp 2 --pp 2 --ep 2 --micro-batches 2
    layout tpcpdpep 8 "ep 2; tp 2 x cp 2 x dp 2 x batch 8" "$work/one" "${common[@]}" \
      --batch 8 --tp 2 --cp 2 --ep 2
    layout cpppdpep 8 "ep 2; tp 1 x cp 2 x dp 2 x pp 2 (1f1b, blocks 1/1) x batch 8" "$work/one" \
      "${common[@]}" --batch 8 --cp 2 --pp 2 --ep 2
    refused groups "--moe-group-tokens '0' is not valid: must divide the 16 tokens of a sample \
each of --cp 2 ranks holds" "$train" "${small[@]}" --moe-experts 4 --cp 2 --steps 2
    ;;
  resume)
    common=("${small[@]}" --layers 4)
    "$train" "${common[@]}" --batch 16 --steps 6 >"$work/full" ||
      fail "uninterrupted run exited with $?"
    awk '$1 != "epoch" || $4 > 3' "$work/full" >"$work/full_after_3"
    "$run" -n 8 --timeout 200 "$train" "${common[@]}" --batch 8 --steps 3 --tp 2 --pp 2 \
      --micro-batches 2 --zero 1 --checkpoint "$work/ck" >"$work/first" ||
      fail "first half exited with $?"
    cat "$work/first"
    grep -q "tp 2 x dp 2 x pp 2 .*(ZeRO-1)" "$work/first" || fail "first half not tp 2 x pp 2"
    for resumed in "8 8 --pp 4 --micro-batches 2" "4 8 --tp 2 --zero 2" "1 16"; do
      read -r n batch extra <<<"$resumed"
      dir="$work/n$n"
      mkdir "$dir" && cp "$work"/ck* "$dir/"
      # shellcheck disable=SC2086  # $extra: options or none
      "$run" -n "$n" --timeout 200 "$train" "${common[@]}" --batch "$batch" --steps 6 $extra \
        --checkpoint "$dir/ck" --resume >"$work/second$n" || fail "resumed at $n exited with $?"
      cat "$work/second$n"
      grep -q "resumed from .* at step 3" "$work/second$n" || fail "$n ranks: no resume"
      same_losses "$work/full_after_3" "$work/second$n" 1e-5
    done
    grep -q "tp 1 x dp 2 x pp 4" "$work/second8" || fail "not resumed at pp 4 x dp 2"
    grep -q "tp 2 x dp 2 x batch 8 (ZeRO-2)" "$work/second4" || fail "not resumed at ZeRO-2"
    refused global "global batch 16, this run has global batch 24" \
      "$run" -n 3 --timeout 100 "$train" "${common[@]}" --batch 8 --steps 6 \
      --checkpoint "$work/n8/ck" --resume
    ;;
  zero3)
    common=("${small[@]}" --layers 4)
    "$train" "${common[@]}" --batch 16 --steps 6 >"$work/full" ||
      fail "uninterrupted run exited with $?"
    awk '$1 != "epoch" || $4 > 3' "$work/full" >"$work/full_after_3"
    "$run" -n 4 --timeout 200 "$train" "${common[@]}" --batch 4 --steps 3 --zero 3 \
      --checkpoint "$work/z3.ck" >"$work/z3first" || fail "ZeRO-3 first half exited with $?"
    grep -q "tp 1 x dp 4 x batch 4 (ZeRO-3)" "$work/z3first" || fail "first half not ZeRO-3"
    resumes z3tp "$work/z3.ck" 4 8 --tp 2
    grep -q "tp 2 x dp 2 x batch 8;" "$work/z3tp.log" || fail "not resumed at tp 2 x dp 2"
    resumes z3pp "$work/z3.ck" 4 8 --pp 2 --micro-batches 2 --zero 1
    grep -q "dp 2 x pp 2 .*(ZeRO-1)" "$work/z3pp.log" || fail "not resumed at pp 2 with ZeRO-1"
    "$run" -n 4 --timeout 200 "$train" "${common[@]}" --batch 8 --steps 3 --tp 2 \
      --checkpoint "$work/tp.ck" >"$work/tpfirst" || fail "tp 2 x dp 2 first half exited with $?"
    resumes tpz3 "$work/tp.ck" 4 4 --zero 3
    grep -q "dp 4 x batch 4 (ZeRO-3)" "$work/tpz3.log" || fail "not resumed under ZeRO-3"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
