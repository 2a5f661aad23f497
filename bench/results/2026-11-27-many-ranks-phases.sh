#!/usr/bin/env bash
# Where a many-rank job's time goes: one job of N ranks (chorus-perf, 8 B all-reduce, 10
# iterations after 2 warm-ups) whose ranks stamp their start and end, with CHORUS_DEBUG=INFO for
# each rank's connection steps.
#
# usage: bench/results/2026-11-27-many-ranks-phases.sh BIN_DIR N
#   BIN_DIR holds chorusrun and chorus-perf. Prints the job's wall time, when the last rank
#   started, when the first and the last ended (seconds after launch), the mean and largest
#   time of the connection steps over the ranks (ms), and the all-reduce row.
set -uo pipefail
bin="$1"
n="$2"
stamps=$(mktemp -d)
wrapper="$stamps/stamp.sh"
cat >"$wrapper" <<WRAP
#!/bin/sh
echo "start \$(date +%s.%N)" >>"$stamps/\$RANK"
"\$@"
echo "end \$(date +%s.%N)" >>"$stamps/\$RANK"
WRAP
chmod +x "$wrapper"
out=$(mktemp)
err=$(mktemp)
start=$(date +%s.%N)
CHORUS_DEBUG=INFO timeout 300 "$bin/chorusrun" -n "$n" "$wrapper" "$bin/chorus-perf" -t allreduce \
  -b 8 -e 8 -n 10 -w 2 >"$out" 2>"$err"
rc=$?
end=$(date +%s.%N)
cat "$stamps"/[0-9]* | awk -v s="$start" -v e="$end" -v rc="$rc" '
  $1 == "start" { if ($2 > last_start) last_start = $2 }
  $1 == "end" {
    if ($2 > last_end) last_end = $2
    if (first_end == "" || $2 < first_end) first_end = $2
  }
  END {
    printf "rc %d, job %.1f s, last rank started %.1f s, ", rc, e - s, last_start - s
    printf "first ended %.1f s, last ended %.1f s\n", first_end - s, last_end - s
  }'
grep ' connected: ' "$err" | sed 's/.*connected: //' | awk -F'[ ,]+' '
  { r += $2; g += $5; a += $8; k++
    if ($2 > mr) mr = $2; if ($5 > mg) mg = $5; if ($8 > ma) ma = $8 }
  END { printf "connection steps, mean/largest ms: records %d/%d, rings %d/%d, arena %d/%d\n",
        r / k, mr, g / k, mg, a / k, ma }'
grep -v '^#' "$out" | tail -1
rm -rf "$stamps" "$out" "$err"
