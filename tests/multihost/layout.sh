#!/usr/bin/env bash
# tests/multihost/layout.sh HOSTS RANKS CHORUSRUN CHORUS_PERF: one Chorus job layout across
# HOSTS simulated hosts of RANKS ranks each (scripts/hosts.sh), over links shaped to 2 Gbit/s.
# chorus-perf runs every collective, dtype and op at sizes 7 B to 195 KiB (odd ones), out of
# place and in place, with its result check on, at root 0, then the rooted ones (broadcast,
# reduce, gather, scatter) at every other root, one job each; links.sh watches that ranks of
# a host share memory and ranks of different hosts use TCP; the first report must show HOSTS
# host names and the hierarchical all-reduce at the largest size. Then the same sweep with
# the two-level algorithms asked for by name (-a hierarchical), at roots 0, 1 and the last,
# and the striped all-gather and reduce-scatter asked for by name (-a striped).
# Exit status 77 (ctest's skip) when this machine cannot simulate hosts.
set -uo pipefail
[ $# -eq 4 ] || { echo "usage: layout.sh HOSTS RANKS CHORUSRUN CHORUS_PERF" >&2; exit 2; }
hosts=$1 ranks=$2 chorusrun=$3 perf=$4
test_name="layout ${hosts}x${ranks}"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

sweep=(-d all -o all -b 7 -e 200000 -f 13 -n 1 -w 0 -c 1 -z)
jobs=("$perf" -t all "${sweep[@]}" -r 0)
for ((r = 1; r < hosts * ranks; ++r)); do
  for rooted in broadcast reduce gather scatter; do
    jobs+=(--then "$perf" -t "$rooted" "${sweep[@]}" -r "$r")
  done
done
# The two-level algorithms asked for by name (the cost model picks them only where links
# between hosts are slow against those inside a host), at root 0, at rank 1 (not its host's
# lowest rank when hosts hold several) and at the last rank (on the last host).
forced_job=$((1 + (hosts * ranks - 1) * 4))  # its index among the jobs
jobs+=(--then "$perf" -t all "${sweep[@]}" -r 0 -a hierarchical)
for r in 1 $((hosts * ranks - 1)); do
  for rooted in broadcast reduce gather scatter; do
    jobs+=(--then "$perf" -t "$rooted" "${sweep[@]}" -r "$r" -a hierarchical)
  done
done
# The striped all-gather and reduce-scatter, every dtype and op, sizes from 0 elements per
# rank up, in place too.
striped_job=$((forced_job + 9))
jobs+=(--then "$perf" -t allgather "${sweep[@]}" -a striped
  --then "$perf" -t reducescatter "${sweep[@]}" -a striped)
run_hosts --hosts "$hosts" --ranks-per-host "$ranks" --rate 2gbit --timeout 120 \
  --chorusrun "$chorusrun" --during "$here/links.sh" -- "${jobs[@]}"

report="$logs/job0.host0.log"
for ((r = 0; r < hosts * ranks; ++r)); do
  grep -Eq "Rank +$r Pid +[0-9]+ on host$((r / ranks))\$" "$report" ||
    fail "the report does not place rank $r on host$((r / ranks))"
done
collectives=$(grep -c '^# Collective:' "$report")
[ "$collectives" -eq 11 ] || fail "the report has $collectives collectives, not 11"
# The largest float32 sum all-reduce (199924 B; row: size count type op root ... algorithm)
# runs the two-level algorithm, which only a topology of several hosts with several ranks
# each offers.
if [ "$ranks" -gt 1 ]; then
  algorithm=$(awk '/^# Collective: / {on = ($3 == "allreduce")}
                   on && $1 == 199924 && $3 == "float32" && $4 == "sum" {print $NF}' "$report")
  [ "$algorithm" = hierarchical ] ||
    fail "the 199924 B float32 all-reduce ran '$algorithm', not hierarchical"
fi
# The forced job ran the two-level form of every collective that has one, at every size
# that moves data (all-to-all-v and send/receive have none).
forced_report="$logs/job$forced_job.host0.log"
if [ "$ranks" -gt 1 ]; then
  others=$(awk '/^# Collective: / {c = $3}
    c != "alltoallv" && c != "sendrecv" && $1 ~ /^[0-9]+$/ && (c == "barrier" || $2 + 0 > 0) &&
        $NF != "hierarchical" {
      print c " " $1 " " $NF}' "$forced_report" | head -3)
  [ -z "$others" ] || fail "the job that asked for hierarchical ran other algorithms: $others"
  grep -q 'hierarchical$' "$forced_report" || fail "the forced job's report shows no hierarchical"
fi
# The striped jobs ran the stripes at every size that moves data (every host holds RANKS
# ranks; with one each there are no stripes and the leaders' form runs).
if [ "$ranks" -gt 1 ]; then
  for j in "$striped_job" $((striped_job + 1)); do
    report="$logs/job$j.host0.log"
    others=$(awk '$1 ~ /^[0-9]+$/ && $2 + 0 > 0 && $NF != "striped" {print $1 " " $NF}' \
      "$report" | head -3)
    [ -z "$others" ] || fail "job $j, which asked for striped, ran other algorithms: $others"
    grep -q 'striped$' "$report" || fail "job $j's report shows no striped"
  done
fi
echo "$test_name: every collective, dtype, op and root correct across hosts"
