#!/usr/bin/env bash
# Black-box tests of chorus-train --model gpt --moe-experts under chorusrun (registered by
# tests/train/CMakeLists.txt):
#   moe_job_test.sh CHORUSRUN CHORUS_TRAIN MODE
# MODE: train|refused|kill
# train: 2 ranks at --ep 2 (dp 2, top-2, dropless) train: the loss falls, the progress lines
# carry each expert's kept tokens, the drop rate (0) and the aux loss, validation runs; the
# per-step losses equal those of --ep 1 at dp 2 (fp32, relative 1e-5). With --moe-capacity 0.5
# the drop rate is above 0.
# refused: --ep that does not divide dp·cp, experts not a multiple of --ep, --no-sync, --moe-top-k above
# the experts, a capacity factor of 0, --ep without --moe-experts and MoE with
# --sequence-parallel fail before step 1 with their sentence.
# kill: an --ep 2 job of two one-rank chorusrun nodes (so no launcher stops the survivor);
# rank 1's process is killed (SIGKILL) during training, whose steps are mostly the experts'
# all-to-all-v: rank 0 fails by itself well within CHORUS_TIMEOUT (20 s) naming rank 1.
set -euo pipefail
run="$1"
train="$2"
mode="$3"
# shellcheck source=../data/job_helpers.sh
source "$(dirname "$0")/../data/job_helpers.sh"  # also makes $work, removed on exit
small=(--model gpt --layers 2 --hidden 32 --heads 4 --seq-len 32 --batch 4 --log-every 1
  --eval-windows 32 --moe-experts 4 --moe-top-k 2)

case "$mode" in
  train)
    for ep in 2 1; do
      "$run" -n 2 --timeout 100 "$train" "${small[@]}" --moe-capacity dropless --ep "$ep" \
        --steps 12 --eval-every 6 --no-eval >"$work/log$ep" || fail "--ep $ep exited with $?"
      cat "$work/log$ep"
    done
    loss_fell "$work/log2"
    grep -q "moe 4 experts top-k 2 capacity dropless every 1, ep 2" "$work/log2" ||
      fail "no MoE description"
    grep -Eq "^epoch 0 step 1 loss .* experts [0-9]+/[0-9]+/[0-9]+/[0-9]+ drop 0.0000 aux " \
      "$work/log2" || fail "no expert counts, drop rate or aux loss in the progress line"
    grep -q "^validation step 6: loss" "$work/log2" || fail "no validation"
    paste <(losses "$work/log2") <(losses "$work/log1") | awk '
      { d = $2 - $4; if (d < 0) d = -d }
      $1 != $3 || d > 1e-5 * $2 { print "step " $1 ": " $2 " vs " $4; bad = 1 }
      END { exit bad }' || fail "ep 2 and ep 1 losses differ"
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --moe-capacity 0.5 --ep 2 --steps 3 \
      --eval-every 0 --no-eval >"$work/capacity" || fail "--moe-capacity 0.5 exited with $?"
    cat "$work/capacity"
    grep -Eq "^epoch 0 step 3 .* drop 0\.[0-9]*[1-9]" "$work/capacity" || fail "nothing dropped"
    ;;
  refused)
    quick=(--steps 1 --no-eval --eval-every 0)
    refused ep "ep 3 does not divide dp·cp = 2" "$run" -n 2 --timeout 60 "$train" "${small[@]}" \
      "${quick[@]}" --moe-experts 6 --ep 3
    refused experts "--moe-experts '3' is not valid: is not a multiple of --ep 2" "$run" -n 2 --timeout 60 \
      "$train" --model gpt --moe-experts 3 --ep 2 "${quick[@]}"
    refused topk "--moe-top-k '2' is not valid: exceeds --moe-experts 1" "$train" --model gpt --moe-experts 1 \
      --moe-top-k 2 "${quick[@]}"
    refused capacity "--moe-capacity '0' is not valid: must be a capacity factor > 0 or dropless" "$train" \
      --model gpt --moe-experts 2 --moe-capacity 0 "${quick[@]}"
    refused noexperts "--ep '2' is not valid: needs --moe-experts" "$train" --model gpt --ep 2 "${quick[@]}"
    refused nosync "--moe-experts '2' is not valid: cannot be combined with --no-sync" "$train" \
      --model gpt --moe-experts 2 --no-sync "${quick[@]}"
    refused sp "MoE blocks do not run under sequence parallelism" "$run" -n 2 --timeout 60 \
      "$train" "${small[@]}" "${quick[@]}" --tp 2 --sequence-parallel
    ;;
  kill)
    port="$(free_port_pair)"
    export CHORUS_AUTH_TOKEN=moe-kill-test CHORUS_TIMEOUT=20 CHORUS_TRACE_DIR="$work"
    common=("${small[@]}" --ep 2 --moe-capacity dropless --steps 100000 --no-eval --eval-every 0)
    launchers=()
    for node in 0 1; do
      "$run" --nnodes 2 --node-rank "$node" --master-addr 127.0.0.1 --master-port "$port" -n 1 \
        --timeout 100 "$train" "${common[@]}" >"$work/out$node" 2>"$work/err$node" &
      launchers+=($!)
    done
    for _ in $(seq 300); do
      grep -q "^epoch 0 step 3 " "$work/out0" && break
      sleep 0.2
    done
    grep -q "^epoch 0 step 3 " "$work/out0" || fail "the job did not reach step 3"
    victim=""  # node 1's chorus-train: the child of its chorusrun (read from /proc)
    for stat in /proc/[0-9]*/stat; do
      read -r pid name _ parent _ <"$stat" 2>/dev/null || continue
      if [ "$parent" = "${launchers[1]}" ] && [ "$name" = "(chorus-train)" ]; then victim="$pid"; fi
    done
    [ -n "$victim" ] || fail "no rank 1 process"
    kill -KILL "$victim"
    start=$(date +%s)
    if wait "${launchers[0]}"; then fail "rank 0 finished"; fi
    elapsed=$(($(date +%s) - start))
    cat "$work/out0" "$work/err0" | grep -v "flight recorder"
    [ "$elapsed" -lt 20 ] || fail "rank 0 failed after $elapsed s"
    grep -q "^chorus-train: .*rank 1 (pid $victim) died" "$work/err0" ||
      fail "rank 0 does not name rank 1"
    wait "${launchers[1]}" || true
    ;;
  *)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
