#!/usr/bin/env bash
# tests/multihost/layout.sh HOSTS RANKS CHORUSRUN CHORUS_PERF: one Chorus job layout across
# HOSTS simulated hosts of RANKS ranks each (scripts/hosts.sh), over links shaped to 2 Gbit/s.
# chorus-perf runs every collective, dtype and op at sizes 7 B to 195 KiB (odd ones), out of
# place and in place, with its result check on, at root 0, then the rooted ones (broadcast,
# reduce, gather, scatter) at every other root, one job each; links.sh watches that ranks of
# a host share memory and ranks of different hosts use TCP; the first report must show HOSTS
# host names and the hierarchical all-reduce at the largest size.
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
echo "$test_name: every collective, dtype, op and root correct across hosts"
