#!/usr/bin/env bash
# Black-box tests of chorus-train under chorusrun (registered by CMakeLists.txt):
#   train_job_test.sh CHORUSRUN CHORUS_TRAIN mlp|lstm|resume|alternate|...
# mlp/lstm: a short run exits 0, its loss falls, the replicas agree and the test metrics are
# printed; mlp also runs as a single rank without chorusrun. resume: a run interrupted at
# step 10 and resumed from its checkpoint prints the same per-step losses (9 significant
# digits) as an uninterrupted run. alternate: --alternate-sync reports the medians of both
# kinds of step and refuses --no-sync. mismatch: resuming with another --hidden, --optimizer
# or global batch is refused with a sentence naming the difference, before any step, leaving
# the checkpoint as it was. fresh: --resume without a file says it starts from scratch.
# badpath: an unwritable --checkpoint fails before step 1. options: values chorus-train
# cannot use are refused by the parser, naming the option and the value. zero: --zero 1, 2 and
# 3 (MLP) and --zero 3 (GPT) at 3 ranks print the losses DDP prints (relative 1e-5: the same
# mean gradient, reduced in another order) and --zero refuses what it does not support,
# --zero 2|3 with --pp > 1 among it. restart: a rank
# killed at a random moment after the first checkpoint, under chorusrun --max-restarts, is
# restarted with the whole job, which resumes from its last complete checkpoint and ends
# with an uninterrupted run's parameters (the final checkpoints' model pieces agree).
# zeroresume: a --zero 2 run at 4 ranks resumed at 4 ranks equals the uninterrupted run, and
# at 2 ranks --zero 1, 3 ranks DDP and 1 rank continues its losses; a wrong global batch and
# a truncated shard file are refused. zero3resume: the same for a --zero 3 run at 4 ranks
# (resumed at 2 ranks --zero 1 and --zero 3, 3 ranks DDP, 1 rank), and a GPT --zero 3 run at
# 2 ranks resumed with the uninterrupted run's losses; the GPT's one checkpoint kind resumed by
# a run without ZeRO and the other way round. zeromixed: --mixed-precision bf16|fp16 under
# --zero 1|2|3 follows DDP's losses within 3e-2 (the GPT: bf16 under --zero 1 and 3, its fp32
# losses), its checkpoint resumes without it, and it is refused without --zero, with the GPT in
# fp16 and with --pp. zeromixedresume: --mixed-precision bf16 under --zero 1, 2 and 3 (the MLP
# and the GPT) at 2 ranks saved at step 3 and resumed prints the uninterrupted run's losses
# and ends with its checkpoint (every parameter and optimizer piece).
set -euo pipefail
run="$1"
train="$2"
mode="$3"
# shellcheck source=job_helpers.sh
source "$(dirname "$0")/job_helpers.sh"  # also makes $work, removed on exit
support="$(cd "$(dirname "$0")/../../support" && pwd)"  # restart_rank.sh, checkpoint_model.sh

check_run() {  # log: exit status already checked; loss fell, replicas equal, metrics printed
  local log="$1"
  cat "$log"
  loss_fell "$log"
  grep -q "replicas equal: yes" "$log" || fail "replicas differ or were not checked"
  grep -q "^test: " "$log" || fail "no test metrics"
}

# The GPT under --zero 3 at 2 ranks: saved at step 3, resumed with the uninterrupted run's
# losses (the same ranks and arithmetic: 9 equal digits); a GPT run without ZeRO resumes that
# checkpoint, and --zero 3 resumes a checkpoint of a run without ZeRO, each with the
# uninterrupted run's losses (relative 1e-5).
gpt_zero3_resume() {
  local gpt=(--model gpt --log-every 1 --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch 4
    --no-eval --eval-every 0)
  "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --zero 3 --steps 6 >"$work/gptfull" ||
    fail "GPT uninterrupted run exited with $?"
  "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --zero 3 --steps 3 --checkpoint "$work/gpt.ck" \
    >"$work/gptfirst" || fail "GPT first half exited with $?"
  mkdir "$work/other" && cp "$work"/gpt.ck* "$work/other/"  # the resumed run saves at step 6
  "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --zero 3 --steps 6 --checkpoint "$work/gpt.ck" \
    --resume >"$work/gptsecond" || fail "GPT resumed run exited with $?"
  cat "$work/gptsecond"
  grep -q "resumed from $work/gpt.ck at step 3" "$work/gptsecond" || fail "the GPT did not resume"
  diff <(losses "$work/gptfull" | awk '$1 > 3') <(losses "$work/gptsecond") ||
    fail "the resumed GPT's losses differ from the uninterrupted run's"
  awk '$1 != "epoch" || $4 > 3' "$work/gptfull" >"$work/gptfull_after_3"
  "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --steps 3 \
    --checkpoint "$work/other/plain.ck" >"$work/plainfirst" ||
    fail "GPT run without ZeRO exited with $?"
  for kind in gpt plain; do
    local zero=()
    if [ "$kind" = plain ]; then zero=(--zero 3); fi
    "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" "${zero[@]}" --steps 6 \
      --checkpoint "$work/other/$kind.ck" --resume >"$work/${kind}other" ||
      fail "the other kind of run resuming $kind.ck exited with $?"
    cat "$work/${kind}other"
    grep -q "resumed from $work/other/$kind.ck at step 3" "$work/${kind}other" ||
      fail "$kind.ck was not resumed by the other kind of run"
    same_losses "$work/gptfull_after_3" "$work/${kind}other" 1e-5
  done
}

pieces() { grep '^piece ' "$1"; }  # a checkpoint index's pieces: tensor, place, checksum

# mixed_resume NAME ARGS...: chorus-train ARGS at 2 ranks for 6 steps, and for 3 steps then
# resumed to 6: the same losses after step 3 (9 digits) and the same final checkpoint pieces
# (fp32 masters and optimizer state; their checksums).
mixed_resume() {
  local name="$1"
  shift
  "$run" -n 2 --timeout 100 "$train" "$@" --steps 6 --checkpoint "$work/$name-full.ck" \
    >"$work/$name-full" || fail "$name: uninterrupted run exited with $?"
  "$run" -n 2 --timeout 100 "$train" "$@" --steps 3 --checkpoint "$work/$name.ck" \
    >"$work/$name-first" || fail "$name: first half exited with $?"
  "$run" -n 2 --timeout 100 "$train" "$@" --steps 6 --checkpoint "$work/$name.ck" --resume \
    >"$work/$name-second" || fail "$name: resumed run exited with $?"
  cat "$work/$name-second"
  grep -q "resumed from $work/$name.ck at step 3" "$work/$name-second" || fail "$name: no resume"
  diff <(losses "$work/$name-full" | awk '$1 > 3') <(losses "$work/$name-second") ||
    fail "$name: the resumed run's losses differ from the uninterrupted run's"
  diff <(pieces "$work/$name-full.ck") <(pieces "$work/$name.ck") ||
    fail "$name: the resumed run's final checkpoint differs from the uninterrupted run's"
}

case "$mode" in
  restart)
    common=(--model mlp --log-every 20 --hidden 128 --layers 2 --no-eval --steps 400
            --checkpoint-every 20)
    "$run" -n 2 --timeout 200 "$train" "${common[@]}" --checkpoint "$work/a.pt" \
      >"$work/full" || fail "uninterrupted run exited with $?"
    # Rank 1 of the first run kills itself 0-0.09 s after the first checkpoint appeared.
    CK="$work/b.pt" KILL_RANK=1 "$run" -n 2 --timeout 200 --max-restarts 2 \
      "$support/restart_rank.sh" "$train" "${common[@]}" --checkpoint "$work/b.pt" --resume \
      >"$work/restarted" 2>"$work/err" || fail "restarted run exited with $?: $(cat "$work/err")"
    cat "$work/err" "$work/restarted"
    grep -q "rank 1 (pid [0-9]*) was killed by signal 9" "$work/err" || fail "rank 1 was not killed"
    grep -q "restarting the job (restart 1 of 2)" "$work/err" || fail "the job was not restarted"
    grep -q "resumed from" "$work/restarted" || fail "the restarted job did not resume"
    diff <("$support/checkpoint_model.sh" "$work/a.pt") \
      <("$support/checkpoint_model.sh" "$work/b.pt") ||
      fail "final parameters differ from the uninterrupted run's"
    ;;
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
  zero)
    common=(--model mlp --steps 12 --log-every 1 --hidden 64 --layers 2 --batch 16 --no-eval)
    "$run" -n 3 --timeout 100 "$train" "${common[@]}" >"$work/ddp" || fail "DDP run exited with $?"
    for stage in 1 2 3; do
      "$run" -n 3 --timeout 100 "$train" "${common[@]}" --zero "$stage" --optimizer adam \
        >"$work/adam$stage" || fail "--zero $stage --optimizer adam exited with $?"
      loss_fell "$work/adam$stage"
      "$run" -n 3 --timeout 100 "$train" "${common[@]}" --zero "$stage" >"$work/zero$stage" ||
        fail "--zero $stage exited with $?"
      cat "$work/zero$stage"
      [ "$(losses "$work/zero$stage" | wc -l)" -eq 12 ] || fail "expected 12 steps at --zero $stage"
      paste <(losses "$work/ddp") <(losses "$work/zero$stage") | awk '
        { d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * ($2 < 0 ? -$2 : $2)) bad = bad " " $1 }
        END { if (bad != "") { print "steps differing:" bad; exit 1 } }' ||
        fail "--zero $stage losses differ from DDP's"
    done
    same() {  # LOG_A LOG_B: the same steps, losses within 1e-5 (relative)
      paste <(losses "$1") <(losses "$2") | awk '
        { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * ($2 < 0 ? -$2 : $2)) bad = 1 }
        END { exit bad }'
    }
    gpt=(--model gpt --steps 6 --log-every 1 --layers 2 --hidden 32 --heads 4 --seq-len 16
      --batch 4 --no-eval)
    "$run" -n 3 --timeout 100 "$train" "${gpt[@]}" >"$work/gptddp" || fail "GPT DDP exited with $?"
    "$run" -n 3 --timeout 100 "$train" "${gpt[@]}" --zero 3 >"$work/gptzero3" ||
      fail "GPT --zero 3 exited with $?"
    cat "$work/gptzero3"
    [ "$(losses "$work/gptzero3" | wc -l)" -eq 6 ] || fail "expected 6 GPT steps at --zero 3"
    same "$work/gptddp" "$work/gptzero3" || fail "GPT --zero 3 losses differ from DDP's"
    refused zero4 "--zero '4' is not valid" "$train" --model mlp --steps 2 --zero 4
    refused zerogpt "--zero '2' is not valid: cannot be combined with --pp 2" \
      "$train" --model gpt --steps 2 --zero 2 --pp 2
    refused zeropp "--zero '3' is not valid: cannot be combined with --pp 2" \
      "$train" --model gpt --steps 2 --zero 3 --pp 2
    refused zerolstm "needs --model mlp or gpt" "$train" --model lstm --steps 2 --zero 3
    refused zero3moe "cannot be combined with --moe-experts" \
      "$train" --model gpt --steps 2 --zero 3 --moe-experts 2
    ;;
  zeromixed)
    # --mixed-precision bf16 and fp16 under --zero 1, 2 and 3 at 2 ranks: the loss falls and
    # follows DDP's in fp32 within 3e-2 (relative); the fp32 masters resume without it.
    common=(--model mlp --steps 12 --log-every 1 --hidden 64 --layers 2 --batch 16 --no-eval)
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" >"$work/ddp" || fail "DDP run exited with $?"
    for stage in 1 2 3; do
      for type in bf16 fp16; do
        log="$work/zero$stage$type"
        "$run" -n 2 --timeout 100 "$train" "${common[@]}" --zero "$stage" \
          --mixed-precision "$type" --checkpoint "$log.ck" >"$log" ||
          fail "--zero $stage --mixed-precision $type exited with $?"
        cat "$log"
        loss_fell "$log"
        [ "$(losses "$log" | wc -l)" -eq 12 ] || fail "expected 12 steps at $stage $type"
        paste <(losses "$work/ddp") <(losses "$log") | awk '
          { d = $2 - $4; if (d < 0) d = -d; if (d > 3e-2 * ($2 < 0 ? -$2 : $2)) bad = bad " " $1 }
          END { if (bad != "") { print "steps differing:" bad; exit 1 } }' ||
          fail "--zero $stage --mixed-precision $type strays from DDP's losses"
      done
    done
    "$run" -n 2 --timeout 100 "$train" "${common[@]}" --zero 3 --steps 14 \
      --checkpoint "$work/zero3bf16.ck" --resume >"$work/resumed" || fail "fp32 resume exited with $?"
    grep -q "resumed from $work/zero3bf16.ck at step 12" "$work/resumed" ||
      fail "the fp32 run did not resume the bf16 checkpoint"
    # The GPT in bf16 under --zero 1 and 3 follows its fp32 losses within 3e-2 too, and its
    # checkpoint resumes in fp32 without ZeRO.
    gpt=(--model gpt --log-every 1 --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch 4
      --no-eval --eval-every 0)
    "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --steps 6 >"$work/gptfp32" ||
      fail "GPT fp32 run exited with $?"
    for stage in 1 3; do
      log="$work/gptzero$stage"
      "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --steps 6 --zero "$stage" \
        --mixed-precision bf16 --checkpoint "$log.ck" >"$log" ||
        fail "GPT --zero $stage --mixed-precision bf16 exited with $?"
      cat "$log"
      loss_fell "$log"
      same_losses "$work/gptfp32" "$log" 3e-2
    done
    "$run" -n 2 --timeout 100 "$train" "${gpt[@]}" --steps 8 --checkpoint "$work/gptzero1.ck" \
      --resume >"$work/gptresumed" || fail "GPT fp32 resume exited with $?"
    grep -q "resumed from $work/gptzero1.ck at step 6" "$work/gptresumed" ||
      fail "the GPT's fp32 run did not resume the bf16 checkpoint"
    refused mixedpp "--mixed-precision 'bf16' is not valid: cannot be combined with --pp 2" \
      "$train" --model gpt --steps 2 --zero 1 --pp 2 --mixed-precision bf16
    refused mixednozero "--mixed-precision 'bf16' is not valid: needs --zero 1|2|3" \
      "$train" --model mlp --steps 2 --mixed-precision bf16
    refused mixedgpt "--mixed-precision 'fp16' is not valid: needs bf16 with --model gpt" \
      "$train" --model gpt --steps 2 --zero 3 --mixed-precision fp16
    refused mixedtype "--mixed-precision 'fp8' is not valid: expected bf16|fp16" \
      "$train" --model mlp --steps 2 --zero 1 --mixed-precision fp8
    ;;
  zeromixedresume)
    mlp=(--model mlp --log-every 1 --hidden 32 --layers 2 --batch 8 --optimizer adam --no-eval
      --mixed-precision bf16)
    gpt=(--model gpt --log-every 1 --layers 2 --hidden 32 --heads 4 --seq-len 16 --batch 4
      --no-eval --eval-every 0 --optimizer adam --mixed-precision bf16)
    for stage in 1 2 3; do
      mixed_resume "mlp$stage" "${mlp[@]}" --zero "$stage"
      mixed_resume "gpt$stage" "${gpt[@]}" --zero "$stage"
    done
    ;;
  zeroresume | zero3resume)
    # --zero 2 (3) at 4 ranks saved at step 4 (each rank its shards), resumed at 4 ranks (the
    # uninterrupted run's losses and final parameters exactly), at 2 ranks --zero 1, 3 ranks
    # DDP and 1 rank (same global batch: losses within relative 1e-6).
    stage=2 layouts=("4 6 --zero 2" "2 12 --zero 1" "3 8" "1 24")
    if [ "$mode" = zero3resume ]; then
      stage=3 layouts=("4 6 --zero 3" "2 12 --zero 1" "3 8" "1 24" "2 12 --zero 3")
    fi
    common=(--model mlp --log-every 1 --hidden 32 --layers 2 --optimizer adam --no-eval)
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --batch 6 --steps 8 --zero "$stage" \
      --checkpoint "$work/full.pt" >"$work/full" || fail "uninterrupted run exited with $?"
    "$run" -n 4 --timeout 100 "$train" "${common[@]}" --batch 6 --steps 4 --zero "$stage" \
      --checkpoint "$work/ck.pt" >"$work/first" || fail "first half exited with $?"
    [ "$(ls "$work"/ck.pt.*.rank* | wc -l)" -eq 4 ] || fail "expected one data file per rank"
    for layout in "${layouts[@]}"; do
      read -r n batch extra <<<"$layout"
      dir="$work/n$n-${extra//[ -]/}"  # e.g. n4-zero2, n3-
      mkdir "$dir" && cp "$work"/ck.pt* "$dir/"
      # shellcheck disable=SC2086  # $extra: zero or two words
      "$run" -n "$n" --timeout 100 "$train" "${common[@]}" --batch "$batch" --steps 8 $extra \
        --checkpoint "$dir/ck.pt" --resume >"$dir/log" || fail "resume at $layout exited with $?"
      cat "$dir/log"
      grep -q "resumed from $dir/ck.pt at step 4" "$dir/log" || fail "$layout did not resume"
      [ "$(losses "$dir/log" | wc -l)" -eq 4 ] || fail "expected 4 resumed steps at $layout"
      paste <(losses "$work/full" | awk '$1 > 4') <(losses "$dir/log") | awk '
        { d = $2 - $4; if (d < 0) d = -d
          if ($1 != $3 || d > 1e-6 * ($2 < 0 ? -$2 : $2)) bad = bad " " $1 }
        END { if (bad != "") { print "steps differing:" bad; exit 1 } }' ||
        fail "losses resumed at $layout differ from the uninterrupted run's"
    done
    diff <("$support/checkpoint_model.sh" "$work/full.pt") \
      <("$support/checkpoint_model.sh" "$work/n4-zero$stage/ck.pt") ||
      fail "resumed at 4 ranks, the final parameters differ from the uninterrupted run's"
    refused batch \
      "checkpoint $work/ck.pt was made with global batch 24, this run has global batch 18" \
      "$run" -n 3 --timeout 100 "$train" "${common[@]}" --batch 6 --steps 8 --zero 1 \
      --checkpoint "$work/ck.pt" --resume
    data="$(ls "$work"/ck.pt.*.rank2)"
    truncate -s 100 "$data"
    refused truncated "data file $data is 100 bytes, the index records" \
      "$run" -n 2 --timeout 100 "$train" "${common[@]}" --batch 12 --steps 8 --zero 2 \
      --checkpoint "$work/ck.pt" --resume
    if [ "$mode" = zero3resume ]; then gpt_zero3_resume; fi
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
  mismatch)
    ck="$work/ck.pt"
    tiny=(--model mlp --hidden 16 --layers 1 --batch 8 --log-every 1 --no-eval --checkpoint "$ck")
    "$run" -n 2 --timeout 100 "$train" "${tiny[@]}" --steps 2 >"$work/first" ||
      fail "first run exited with $?"
    cp "$ck" "$work/saved.pt"
    refused hidden "checkpoint $ck was made with --hidden 16, this run has --hidden 8" \
      "$run" -n 2 --timeout 100 "$train" "${tiny[@]}" --steps 4 --resume --hidden 8
    refused optimizer \
      "checkpoint $ck was made with --optimizer sgd, this run has --optimizer adam" \
      "$run" -n 2 --timeout 100 "$train" "${tiny[@]}" --steps 4 --resume --optimizer adam --lr 0.05
    refused ranks "checkpoint $ck was made with global batch 16, this run has global batch 24" \
      "$run" -n 3 --timeout 100 "$train" "${tiny[@]}" --steps 4 --resume
    cmp -s "$ck" "$work/saved.pt" || fail "a refused resume rewrote the checkpoint"
    "$run" -n 2 --timeout 100 "$train" "${tiny[@]}" --steps 4 --resume >"$work/second" ||
      fail "matching resume exited with $?"
    cat "$work/second"
    grep -q "resumed from $ck at step 2" "$work/second" || fail "the matching run did not resume"
    [ "$(losses "$work/second" | cut -d' ' -f1 | tr '\n' ' ')" = "3 4 " ] ||
      fail "the resumed run did not take steps 3 and 4"
    ;;
  fresh)
    ck="$work/ck.pt"
    "$run" -n 2 --timeout 100 "$train" --model mlp --hidden 16 --layers 1 --batch 8 --steps 2 \
      --log-every 1 --no-eval --checkpoint "$ck" --resume >"$work/log" ||
      fail "--resume without a checkpoint exited with $?"
    cat "$work/log"
    grep -qF "no checkpoint at $ck: starting from scratch" "$work/log" ||
      fail "no fresh-start notice"
    [ "$(losses "$work/log" | cut -d' ' -f1 | tr '\n' ' ')" = "1 2 " ] ||
      fail "did not train steps 1 and 2"
    [ -f "$ck" ] || fail "no checkpoint written"
    ;;
  badpath)
    nodir=/nonexistent/dir
    refused nodir "checkpoint $nodir/ck.pt cannot be written: directory $nodir does not exist" \
      "$run" -n 2 --timeout 100 "$train" --model mlp --hidden 16 --layers 1 --steps 20 \
      --log-every 1 --no-eval --checkpoint "$nodir/ck.pt"
    if grep -q "^model: " "$work/nodir.out"; then
      fail "loaded the model before checking the path"
    fi
    refused isdir "checkpoint $work cannot be written: $work is a directory" \
      "$run" -n 2 --timeout 100 "$train" --model mlp --hidden 16 --layers 1 --steps 20 \
      --log-every 1 --no-eval --checkpoint "$work"
    refused every "--checkpoint-every '2' is not valid: needs --checkpoint path" \
      "$run" -n 2 --timeout 100 "$train" --model mlp --hidden 16 --layers 1 --steps 20 \
      --checkpoint-every 2
    ;;
  options)
    while read -r option value expected; do
      refused "option$option$value" "chorus-train: $option '$value' is not valid: $expected" \
        "$train" "$option" "$value"
    done <<'CASES'
--lr 0 must be a number > 0 (leave --lr out for the optimizer's default)
--lr -1 must be a number > 0 (leave --lr out for the optimizer's default)
--lr nan must be a number > 0 (leave --lr out for the optimizer's default)
--bucket-cap-mb 0 must be a number from 0.001 to 65536 (MiB)
--bucket-cap-mb 1e9 must be a number from 0.001 to 65536 (MiB)
--steps -1 must be an integer >= 0
--batch 0 must be an integer from 1 to 1048576
--epochs 0 must be an integer from 1 to 1000000
--hidden 0 must be an integer from 1 to 65536
--layers 0 must be an integer from 1 to 64
--threads 0 must be an integer from 1 to 256
--log-every 0 must be an integer >= 1
--alternate-sync 0 must be an integer >= 1
--checkpoint-every -1 must be an integer >= 0
--seed -1 must be an integer >= 0
--seed 99999999999999999999 must be an integer >= 0
--optimizer sgdd expected adam|sgd
CASES
    # An accepted --lr is recorded with the checkpoint and compared on resume.
    "$train" --model mlp --hidden 16 --layers 1 --batch 8 --steps 1 --no-eval --lr 0.25 \
      --checkpoint "$work/lr.pt" >"$work/lr.log" || fail "--lr 0.25 run exited with $?"
    refused lr "was made with --lr 0.25, this run has --lr 0.05" \
      "$train" --model mlp --hidden 16 --layers 1 --batch 8 --steps 2 --no-eval \
      --checkpoint "$work/lr.pt" --resume
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS $mode"
