#!/usr/bin/env bash
# tests/multihost/tune_job.sh CHORUSRUN CHORUS_PERF: `chorus-perf --tune F` as one job across 2
# hosts of 2 ranks, links shaped to 2 Gbit/s, measures both the shm links inside the hosts and
# the tcp links between them and writes both to F, marked measured; then a job reading F
# (CHORUS_TUNING_FILE) runs its large all-gathers on a two-level form (the leaders' or the
# stripes', whose columns the model charges for sharing the host's link) or the ring, correct,
# never on recursive doubling (all ranks of a host across at once, to every other host).
# Exit status 77 (ctest's skip) when this machine cannot simulate hosts.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: tune_job.sh CHORUSRUN CHORUS_PERF" >&2; exit 2; }
chorusrun=$1 perf=$2
test_name=tune
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

file="$logs/tuning.txt"
run_hosts --hosts 2 --ranks-per-host 2 --rate 2gbit --timeout 120 --chorusrun "$chorusrun" -- \
  "$perf" --tune "$file" --then \
  env CHORUS_TUNING_FILE="$file" "$perf" -t allgather -b 1M -e 4M -f 4 -n 2 -w 1 -c 1
grep -q "^# 2 host(s); shm link: alpha .*; tcp link: alpha " "$logs/job0.host0.log" ||
  fail "the tuning run does not report both links across 2 hosts"
for key in shm.alpha_us shm.beta_ns_per_byte tcp.alpha_us tcp.beta_ns_per_byte; do
  grep -Eq "^$key [0-9.e+-]+ +# measured" "$file" || fail "$file has no measured $key"
done
rows=$(awk '$1 ~ /^[0-9]+$/ && $1 >= 1048576 {print $NF}' "$logs/job1.host0.log")
[ "$(echo "$rows" | wc -w)" -eq 2 ] || fail "the all-gather job reports no 1 and 4 MiB rows"
for algorithm in $rows; do
  [ "$algorithm" = hierarchical ] || [ "$algorithm" = striped ] || [ "$algorithm" = ring ] ||
    fail "a large all-gather ran '$algorithm' with the measured links"
done
echo "tune: both links measured across hosts ($(grep -c '# measured$' "$file") values);" \
  "the 1 and 4 MiB all-gathers ran $(echo "$rows" | tr '\n' ' ')"
