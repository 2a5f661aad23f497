#!/usr/bin/env bash
# Black-box tests of chorus-train --model gpt under chorusrun (registered by CMakeLists.txt):
#   gpt_job_test.sh CHORUSRUN CHORUS_TRAIN MODE
# MODE: tp|dp|sp|tpdp|resume|dropout|refused|cp|nosync|pp|ppmix|ppschedules|ppresume|ppdry|ppkill|
#   tpkill
# tp / dp: 2 ranks at tp 2 (dp 1) / at tp 1 x dp 2 train a few steps: the loss falls, the
# periodic validation loss and the final perplexity are printed. sp: tp 2 with and without
# --sequence-parallel gives the same per-step losses (fp32, relative 1e-5) for the same seed.
# tpdp: 4 ranks at tp 2 (with SP) x dp 2 give the losses of 2 ranks at tp 1 x dp 2 (the same
# samples per replica): the dp reducer and the tp partial gradients together are right.
# resume: a run saved at tp 2 after 6 steps and resumed at tp 1 prints the per-step losses of
# an uninterrupted tp 2 run (relative 1e-4: another tp degree sums in another order).
# dropout: tp 2 with --dropout 0.1 gives the same per-step losses (relative 1e-5) with
# --sequence-parallel --recompute full (the masks do not depend on the layout, recomputation
# replays them), and other losses than without dropout.
# cp: 2 ranks at --cp 2 (dp 1) give the per-step losses of one rank (fp32, relative 1e-5) and
# print the periodic and final validation loss; a --cp 2 run saved after 3 steps and resumed
# alone (cp 1) continues with the uninterrupted run's losses (relative 1e-4); --cp 2 at world 3,
# heads 4 at --cp 3, --seq-len 33 at --cp 2 and --cp without --model gpt are refused.
# refused: world 3 with --tp 2, a missing corpus, --tp without --model gpt, a bad --dropout or
# --recompute, and resuming with another --hidden or global batch fail before step 1 with their
# sentence; so do a --dp that does not fit the world, --batch not split by --micro-batches,
# --pp without --model gpt and the interleaved schedule with fewer micro-batches than stages.
# pp: 2 ranks at pp 2 (1f1b, 4 micro-batches) train, validate and print the final perplexity,
# with the per-step losses of one process (relative 1e-5).
# ppschedules: gpipe, interleaved (v 2) and zb-h1 at pp 2, and 1f1b at pp 2 x dp 2, give the
# per-step losses of one process at dp 1 / dp 2 (relative 1e-5).
# ppresume: a checkpoint saved at pp 2 resumes at pp 1, and one saved at pp 1 resumes at pp 2,
# each with the per-step losses of an uninterrupted run (relative 1e-5).
# ppkill: a pp 3 job of three one-rank chorusrun nodes (so no launcher stops the survivors);
# stage 1's process is killed (SIGKILL) during training: stages 0 and 2 both fail by
# themselves, well within CHORUS_TIMEOUT (20 s), each with an error naming rank 1.
# tpkill: the same with a tp 3 job (its vocabulary of 256 padded to 258): rank 1 killed
# mid-step, ranks 0 and 2 fail within 5 s (CHORUS_TIMEOUT 20 s) naming rank 1.
# nosync: --no-sync at tp 2 (SP) x dp 2 gives the per-step losses of tp 1 x dp 2 --no-sync
# (each replica on its own samples; relative 1e-5), which differ from a synchronised run's;
# --alternate-sync 2 at cp 2 x dp 2 gives those of dp 2 --alternate-sync 2 and a summary with
# both step medians.
# ppmix: pp 2 x cp 2 (4 ranks, 2 micro-batches) gives the per-step losses of one process, and
# pp 2 with --dropout 0.1 in 2 micro-batches those of one process with the same dropout (the
# micro-batches draw the whole batch's masks), which differ from the losses without dropout.
# ppdry: --pp-dry-run prints every rank's row and the verifier's bubble equal to the formula,
# without a launcher; refuses interleaved with m < p naming the numbers.
set -euo pipefail
run="$1"
train="$2"
mode="$3"
# shellcheck source=job_helpers.sh
source "$(dirname "$0")/job_helpers.sh"  # also makes $work, removed on exit
small=(--model gpt --layers 2 --hidden 32 --heads 4 --seq-len 32 --batch 8 --log-every 1
  --eval-windows 32)

check_run() {  # log: loss fell, validation and final perplexity printed
  local log="$1"
  cat "$log"
  loss_fell "$log"
  grep -q "tokens/s" "$log" || fail "no tokens/s"
  grep -q "^validation step 10: loss .* perplexity" "$log" || fail "no periodic validation loss"
  grep -q "^final validation: loss .* perplexity" "$log" || fail "no final perplexity"
}

# killed_rank_is_named LIMIT OPTIONS...: a job of three one-rank chorusrun nodes (so no launcher
# stops the survivors) trains chorus-train OPTIONS; node 1's process (rank 1) is killed
# (SIGKILL) once rank 0 has printed step 3: ranks 0 and 2 both fail by themselves within LIMIT
# seconds of the kill, with CHORUS_TIMEOUT at 20 s, each with an error naming rank 1.
killed_rank_is_named() {
  local limit="$1" port victim="" start elapsed node stat pid name parent launchers=()
  shift
  port="$(free_port_pair)"
  export CHORUS_AUTH_TOKEN=kill-test CHORUS_TIMEOUT=20 CHORUS_TRACE_DIR="$work"
  for node in 0 1 2; do
    "$run" --nnodes 3 --node-rank "$node" --master-addr 127.0.0.1 --master-port "$port" -n 1 \
      --timeout 100 "$train" "$@" --steps 100000 --log-every 1 --no-eval --eval-every 0 \
      >"$work/out$node" 2>"$work/err$node" &
    launchers+=($!)
  done
  for _ in $(seq 300); do
    grep -q "^epoch 0 step 3 " "$work/out0" && break
    sleep 0.2
  done
  grep -q "^epoch 0 step 3 " "$work/out0" || fail "the job did not reach step 3"
  for stat in /proc/[0-9]*/stat; do  # node 1's chorus-train: the child of its chorusrun
    read -r pid name _ parent _ <"$stat" 2>/dev/null || continue
    if [ "$parent" = "${launchers[1]}" ] && [ "$name" = "(chorus-train)" ]; then victim="$pid"; fi
  done
  [ -n "$victim" ] || fail "no rank 1 process"
  kill -KILL "$victim"
  start=$(date +%s.%N)
  for node in 0 2; do
    if wait "${launchers[$node]}"; then fail "rank $node finished"; fi
    elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    cat "$work/out$node" "$work/err$node" | grep -v "flight recorder"
    echo "rank $node failed $elapsed s after the kill"
    awk -v e="$elapsed" -v l="$limit" 'BEGIN { exit !(e < l) }' ||
      fail "rank $node failed after $elapsed s (limit $limit s)"
    grep -q "^chorus-train: .*rank 1 (pid $victim) died" "$work/err$node" ||
      fail "rank $node does not name rank 1"
  done
  wait "${launchers[1]}" || true
}

case "$mode" in
  tp | dp)
    degree=2
    [ "$mode" = dp ] && degree=1
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --tp "$degree" --steps 20 --eval-every 10 \
      >"$work/log" || fail "chorusrun -n 2 chorus-train --tp $degree exited with $?"
    check_run "$work/log"
    layout="tp $degree x dp $((2 / degree))"
    grep -q "$layout" "$work/log" || fail "not $layout"
    ;;
  sp)
    for flag in "" --sequence-parallel; do
      "$run" -n 2 --timeout 100 "$train" "${small[@]}" --tp 2 --steps 8 --no-eval \
        --eval-every 0 $flag >"$work/log$flag" || fail "tp 2 $flag exited with $?"
      cat "$work/log$flag"
    done
    grep -q "(sequence parallel)" "$work/log--sequence-parallel" || fail "not sequence parallel"
    same_losses "$work/log" "$work/log--sequence-parallel" 1e-5
    ;;
  tpdp)
    common=("${small[@]}" --steps 6 --no-eval --eval-every 0)
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --tp 2 --sequence-parallel \
      >"$work/tp2dp2" || fail "tp 2 x dp 2 exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --tp 1 >"$work/tp1dp2" ||
      fail "tp 1 x dp 2 exited with $?"
    cat "$work/tp2dp2" "$work/tp1dp2"
    grep -q "tp 2 (sequence parallel) x dp 2" "$work/tp2dp2" || fail "not tp 2 x dp 2"
    same_losses "$work/tp2dp2" "$work/tp1dp2" 1e-5
    ;;
  resume)
    common=("${small[@]}" --no-eval --eval-every 0)
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --tp 2 --steps 12 >"$work/full" ||
      fail "uninterrupted run exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --tp 2 --steps 6 \
      --checkpoint "$work/ck" >"$work/first" || fail "first half exited with $?"
    "$train" "${common[@]}" --tp 1 --steps 12 --checkpoint "$work/ck" --resume \
      >"$work/second" || fail "resumed run at tp 1 exited with $?"
    cat "$work/full" "$work/second"
    grep -q "resumed from .* at step 6" "$work/second" || fail "the second run did not resume"
    grep -q "tp 1 x dp 1" "$work/second" || fail "the second run is not at tp 1"
    awk '$1 != "epoch" || $4 > 6' "$work/full" >"$work/full_after_6"
    same_losses "$work/full_after_6" "$work/second" 1e-4
    ;;
  dropout)
    common=("${small[@]}" --tp 2 --steps 6 --no-eval --eval-every 0)
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --dropout 0.1 >"$work/plain" ||
      fail "tp 2 with dropout exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --dropout 0.1 --sequence-parallel \
      --recompute full >"$work/full" || fail "tp 2, SP, recompute full exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" >"$work/none" ||
      fail "tp 2 without dropout exited with $?"
    cat "$work/plain" "$work/full"
    grep -q "dropout 0.1, recompute full; tp 2 (sequence parallel)" "$work/full" ||
      fail "not dropout 0.1, recompute full, SP"
    same_losses "$work/plain" "$work/full" 1e-5
    ! (same_losses "$work/plain" "$work/none" 1e-5) &>/dev/null || fail "dropout changed nothing"
    ;;
  refused)
    refused dropout1 "--dropout '1' is not valid: must be a number from 0 to below 1" \
      "$train" --model gpt --dropout 1
    refused recompute "--recompute 'half' is not valid: expected full|none|selective" \
      "$train" --model gpt --recompute half
    refused mlp_dropout "--dropout '0.1' is not valid: needs --model gpt" \
      "$train" --model mlp --dropout 0.1
    refused world3 "--tp 2 x --pp 1 does not divide the world of 3 ranks" \
      "$run" -n 3 --timeout 60 "$train" --model gpt --tp 2 --steps 2
    refused corpus "no fortune files in $work/none" \
      "$train" --model gpt --steps 2 --corpus "$work/none"
    refused mlp_tp "--tp '2' is not valid: needs --model gpt" "$train" --model mlp --tp 2
    "$train" "${small[@]}" --steps 1 --no-eval --checkpoint "$work/ck" >"$work/saved" ||
      fail "saving run exited with $?"
    refused hidden "was saved from a model with hidden 32, this model has hidden 64" \
      "$train" "${small[@]}" --hidden 64 --steps 2 --checkpoint "$work/ck" --resume
    refused batch "global batch 8, this run has global batch 4" \
      "$train" "${small[@]}" --batch 4 --steps 2 --checkpoint "$work/ck" --resume
    refused dp "--dp 3 x --tp 1 x --pp 2 is not the world of 4 ranks" \
      "$run" -n 4 --timeout 60 "$train" --model gpt --pp 2 --dp 3 --steps 2
    refused micro "--batch 8 does not split into 3 micro-batches" \
      "$train" --model gpt --micro-batches 3 --steps 2
    refused mlp_pp "--pp '2' is not valid: needs --model gpt" "$train" --model mlp --pp 2
    refused interleaved "2 micro-batches for 4 stages" \
      "$run" -n 4 --timeout 60 "$train" --model gpt --layers 8 --pp 4 --schedule interleaved \
      --micro-batches 2 --steps 2
    ;;
  pp)
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --pp 2 --micro-batches 4 --steps 20 \
      --eval-every 10 >"$work/pp2" || fail "pp 2 exited with $?"
    "$train" "${small[@]}" --steps 20 --no-eval --eval-every 0 >"$work/pp1" ||
      fail "pp 1 exited with $?"
    check_run "$work/pp2"
    grep -q "tp 1 x dp 1 x pp 2 (1f1b, blocks 1/1) in 4 micro-batches" "$work/pp2" ||
      fail "not pp 2 in 4 micro-batches"
    same_losses "$work/pp2" "$work/pp1" 1e-5
    ;;
  ppmix)
    common=("${small[@]}" --steps 4 --no-eval --eval-every 0)
    "$train" "${common[@]}" >"$work/one" || fail "one process exited with $?"
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --pp 2 --cp 2 --micro-batches 2 \
      >"$work/ppcp" || fail "pp 2 x cp 2 exited with $?"
    cat "$work/ppcp"
    grep -q "x cp 2 x dp 1 x pp 2" "$work/ppcp" || fail "not cp 2 x pp 2"
    same_losses "$work/ppcp" "$work/one" 1e-5
    "$train" "${common[@]}" --dropout 0.1 >"$work/drop1" || fail "one process exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --dropout 0.1 --pp 2 --micro-batches 2 \
      >"$work/drop2" || fail "pp 2 with dropout exited with $?"
    cat "$work/drop1" "$work/drop2"
    same_losses "$work/drop2" "$work/drop1" 1e-5
    if paste <(losses "$work/drop1") <(losses "$work/one") | awk '$2 != $4 { d = 1 } END { exit d }'
    then
      fail "dropout 0.1 gave the losses of no dropout"
    fi
    ;;
  ppschedules)
    common=("${small[@]}" --layers 4 --steps 4 --no-eval --eval-every 0)
    "$train" "${common[@]}" >"$work/one" || fail "one process exited with $?"
    for schedule in gpipe interleaved zb-h1; do
      "$run" -n 2 --timeout 100 "$train" "${common[@]}" --pp 2 --schedule "$schedule" \
        --micro-batches 2 >"$work/$schedule" || fail "pp 2 $schedule exited with $?"
      cat "$work/$schedule"
      grep -q "pp 2 ($schedule" "$work/$schedule" || fail "not pp 2 $schedule"
      same_losses "$work/$schedule" "$work/one" 1e-5
    done
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" >"$work/dp2" || fail "dp 2 exited with $?"
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --pp 2 --dp 2 --micro-batches 2 \
      >"$work/pp2dp2" || fail "pp 2 x dp 2 exited with $?"
    cat "$work/pp2dp2"
    grep -q "dp 2 x pp 2" "$work/pp2dp2" || fail "not dp 2 x pp 2"
    same_losses "$work/pp2dp2" "$work/dp2" 1e-5
    ;;
  ppresume)
    common=("${small[@]}" --no-eval --eval-every 0)
    "$train" "${common[@]}" --steps 8 >"$work/full" || fail "uninterrupted run exited with $?"
    awk '$1 != "epoch" || $4 > 4' "$work/full" >"$work/full_after_4"
    for saved in 2 1; do
      resumed=$((3 - saved))
      "$run" -n "$saved" --timeout 100 "$train" "${common[@]}" --pp "$saved" --steps 4 \
        --micro-batches 2 --checkpoint "$work/ck$saved" >"$work/first$saved" ||
        fail "pp $saved first half exited with $?"
      "$run" -n "$resumed" --timeout 100 "$train" "${common[@]}" --pp "$resumed" --steps 8 \
        --micro-batches 2 --checkpoint "$work/ck$saved" --resume >"$work/second$saved" ||
        fail "pp $resumed resumed run exited with $?"
      cat "$work/second$saved"
      grep -q "resumed from .* at step 4" "$work/second$saved" || fail "pp $resumed: no resume"
      same_losses "$work/full_after_4" "$work/second$saved" 1e-5
    done
    ;;
  ppdry)
    "$train" --model gpt --layers 8 --pp 4 --schedule interleaved --micro-batches 4 \
      --pp-dry-run >"$work/dry" || fail "--pp-dry-run exited with $?"
    cat "$work/dry"
    grep -q "^interleaved: p 4, m 4, v 2; bubble 0.2727" "$work/dry" || fail "no header"
    [ "$(grep -c '^rank [0-3] |F0a|' "$work/dry")" -eq 1 ] || fail "rank 0 does not start"
    [ "$(grep -c '^rank [0-3] |' "$work/dry")" -eq 4 ] || fail "not 4 rows"
    grep -q "^bubble 0.2727 (verifier, F = B = W = 1), formula 0.2727" "$work/dry" ||
      fail "the verifier's bubble is not the formula's"
    if grep -q "^epoch " "$work/dry"; then fail "the dry run trained"; fi
    refused dry_m "interleaved: 2 micro-batches for 4 stages" \
      "$train" --model gpt --layers 8 --pp 4 --schedule interleaved --micro-batches 2 --pp-dry-run
    ;;
  ppkill)
    killed_rank_is_named 20 --model gpt --layers 3 --hidden 64 --heads 4 --seq-len 64 --batch 8 \
      --pp 3 --micro-batches 4
    ;;
  nosync)
    common=("${small[@]}" --steps 6 --no-eval --eval-every 0)
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --tp 2 --sequence-parallel --no-sync \
      >"$work/tp2" || fail "tp 2 x dp 2 --no-sync exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --no-sync >"$work/dp2" ||
      fail "dp 2 --no-sync exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" >"$work/synced" ||
      fail "dp 2 synchronised exited with $?"
    cat "$work/tp2" "$work/dp2"
    grep -q "tp 2 (sequence parallel) x dp 2 x batch 8, no gradient sync over dp" "$work/tp2" ||
      fail "not tp 2 x dp 2 without sync"
    same_losses "$work/tp2" "$work/dp2" 1e-5
    ! (same_losses "$work/dp2" "$work/synced" 1e-5) &>/dev/null || fail "--no-sync synchronised"
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --cp 2 --alternate-sync 2 >"$work/cp2" ||
      fail "cp 2 x dp 2 --alternate-sync 2 exited with $?"
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --alternate-sync 2 >"$work/alt" ||
      fail "dp 2 --alternate-sync 2 exited with $?"
    cat "$work/cp2" "$work/alt"
    grep -q "x cp 2 x dp 2" "$work/cp2" || fail "not cp 2 x dp 2"
    same_losses "$work/cp2" "$work/alt" 1e-5
    grep -Eq "^summary steps=6 tokens_per_s=[0-9.]+ step_ms_median=[0-9.]+ \
unsynced_step_ms_median=[0-9.]+$" "$work/cp2" || fail "no summary with both medians"
    ;;
  tpkill)
    killed_rank_is_named 5 --model gpt --layers 2 --hidden 96 --heads 6 --seq-len 64 --batch 8 \
      --tp 3
    ;;
  cp)
    common=("${small[@]}" --steps 6)
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --cp 2 --eval-every 3 >"$work/cp2" ||
      fail "cp 2 exited with $?"
    "$train" "${common[@]}" --no-eval --eval-every 0 >"$work/cp1" || fail "cp 1 exited with $?"
    cat "$work/cp2" "$work/cp1"
    grep -q "tp 1 x cp 2 x dp 1" "$work/cp2" || fail "not tp 1 x cp 2 x dp 1"
    grep -q "^validation step 3: loss .* perplexity" "$work/cp2" || fail "no periodic validation"
    grep -q "^final validation: loss .* perplexity" "$work/cp2" || fail "no final perplexity"
    same_losses "$work/cp2" "$work/cp1" 1e-5
    "$run" -n 2 --timeout 100 "$train" "${small[@]}" --cp 2 --steps 3 --no-eval --eval-every 0 \
      --checkpoint "$work/ck" >"$work/first" || fail "first half at cp 2 exited with $?"
    "$train" "${common[@]}" --no-eval --eval-every 0 --checkpoint "$work/ck" --resume \
      >"$work/second" || fail "resumed run at cp 1 exited with $?"
    cat "$work/second"
    grep -q "resumed from .* at step 3" "$work/second" || fail "the second run did not resume"
    awk '$1 != "epoch" || $4 > 3' "$work/cp2" >"$work/cp2_after_3"
    same_losses "$work/cp2_after_3" "$work/second" 1e-4
    refused world3 "--cp 2 does not divide world / (tp x pp) = 3 ranks" \
      "$run" -n 3 --timeout 60 "$train" --model gpt --cp 2 --steps 2
    cp_error="GptModel (context parallel)"
    refused heads "$cp_error: heads 4 / tp 1 = 4 per rank is not a multiple of the cp group's 3" \
      "$run" -n 3 --timeout 60 "$train" "${small[@]}" --cp 3 --steps 2
    refused seq "$cp_error: sequence 33 is not a multiple of the cp group's 2 ranks" \
      "$run" -n 2 --timeout 60 "$train" "${small[@]}" --seq-len 33 --cp 2 --steps 2
    refused mlp_cp "--cp '2' is not valid: needs --model gpt" "$train" --model mlp --cp 2
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
