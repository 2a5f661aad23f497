#!/usr/bin/env bash
# tests/multihost/stranger_job.sh CHORUSRUN CHORUS_PERF: a 2-host x 2-rank job whose data and
# store ports a stranger on the same network connects to while the ranks wait for each other
# (stranger.sh): every collective still completes with correct results, and the ranks say
# they dropped the stranger's connections. Exit status 77 (ctest's skip) when this machine
# cannot simulate hosts.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: stranger_job.sh CHORUSRUN CHORUS_PERF" >&2; exit 2; }
chorusrun=$1 perf=$2
test_name=stranger
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

# host1's ranks start 6 s late, so that host0's ranks listen for them while the stranger calls.
late='[ "$GROUP_RANK" != 1 ] || sleep 6; exec "$0" "$@"'
run_hosts --hosts 2 --ranks-per-host 2 --timeout 60 --chorusrun "$chorusrun" \
  --during "$here/stranger.sh" -- \
  sh -c "$late" "$perf" -t all -d float32 -o sum -b 7 -e 200000 -f 13 -n 1 -w 0 -c 1
grep -q "store server: dropped connection from 10.77.0.254" "$logs/job0.host0.log" ||
  fail "the store on host0 does not report dropping the stranger's connections"
grep -Eq "rank [01] dropped a data connection from 10.77.0.254:" "$logs/job0.host0.log" ||
  fail "no rank of host0 reports dropping the stranger's data connections, naming its address"
grep -q "^stranger: connected" "$logs/job0.during.log" || fail "the stranger connected nowhere"
echo "stranger: the job ignored every connection from 10.77.0.254 and its results are correct"
