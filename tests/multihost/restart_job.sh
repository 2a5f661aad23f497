#!/usr/bin/env bash
# tests/multihost/restart_job.sh CHORUSRUN CHORUS_TRAIN: chorus-train across 2 hosts x 2 ranks,
# run once without failure, then again under --max-restarts 2 with rank 3 (on host1) killed at
# a random moment after the first checkpoint (tests/support/restart_rank.sh). The ranks on
# host0 must report the failure within 2 s of the kill (host1's chorusrun stops rank 2 at once,
# so they may name either rank of host1), both hosts' chorusruns restart the job, which resumes
# from its last complete checkpoint and ends with the uninterrupted run's parameters. Exit
# status 77 (ctest's skip) when this machine cannot simulate hosts.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: restart_job.sh CHORUSRUN CHORUS_TRAIN" >&2; exit 2; }
chorusrun=$1 train=$2
test_name=restart
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

common=(--model mlp --log-every 20 --hidden 64 --layers 1 --no-eval --steps 300
        --checkpoint-every 20)
run_hosts --hosts 2 --ranks-per-host 2 --timeout 200 --chorusrun "$chorusrun" -- \
  "$train" "${common[@]}" --checkpoint "$logs/a.pt"
export CK="$logs/b.pt" KILL_RANK=3 KILLED_AT="$logs/killed_at"
run_hosts --hosts 2 --ranks-per-host 2 --timeout 200 --max-restarts 2 \
  --chorusrun "$chorusrun" -- "$root/tests/support/restart_rank.sh" "$train" "${common[@]}" \
  --checkpoint "$logs/b.pt" --resume
[ -s "$KILLED_AT" ] || fail "rank 3 was never killed"
grep -q "rank 3 (pid [0-9]*) was killed by signal 9" "$logs/job0.host1.log" ||
  fail "host1's chorusrun does not report rank 3 killed"
for h in 0 1; do
  grep -q "restarting the job (restart 1 of 2)" "$logs/job0.host$h.log" ||
    fail "host$h's chorusrun did not restart the job"
done
grep -q "resumed from $logs/b.pt" "$logs/job0.host0.log" || fail "the restarted job did not resume"
killed=$(cat "$KILLED_AT")
for r in 0 1; do
  first=$(awk -v r="$r" '$2 == "r0" && $3 == "rank" && $4 == r":" { print $1; exit }' \
    "$logs/job0.host0.log")
  [ -n "$first" ] || fail "rank $r (host0) reported nothing after rank 3 was killed"
  late=$(awk -v a="$first" -v k="$killed" 'BEGIN { printf "%.2f", a - k }')
  echo "rank $r reported the failure ${late} s after rank 3 was killed"
  awk -v a="$first" -v k="$killed" 'BEGIN { exit !(a - k <= 2.0) }' ||
    fail "rank $r reported the failure ${late} s after rank 3 was killed (more than 2 s)"
done
diff <("$root/tests/support/checkpoint_model.sh" "$logs/a.pt") \
  <("$root/tests/support/checkpoint_model.sh" "$logs/b.pt") ||
  fail "the restarted job's final parameters differ from the uninterrupted run's"
echo "restart: the job survived rank 3's death and ended with the uninterrupted parameters"
