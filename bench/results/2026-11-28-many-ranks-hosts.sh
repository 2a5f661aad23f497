#!/usr/bin/env bash
# Start-up work per rank against n across simulated hosts (scripts/hosts.sh: one network
# namespace per host, run as root): per layout, one job of chorus-perf (a barrier, an
# all-gather, then 8 B all-reduces) with CHORUS_DEBUG=INFO, whose log lines give each rank's
# store requests during its rendezvous ("... connected: ...; K store requests") and the TCP
# links it had when it ended ("... had L TCP links (opened a, admitted b)").
#
# usage: bench/results/2026-11-28-many-ranks-hosts.sh BIN_DIR "HxR HxR ..."
#   BIN_DIR holds chorusrun and chorus-perf. Prints one table row per layout:
#   | hosts x ranks | n | store requests per rank: most ranks, the most of any but rank 0,
#   rank 0 | TCP links per rank: mean, max | a full mesh's (n - R) | 8 B all-reduce us |
#   job s (with the namespaces' set-up) |
set -uo pipefail
bin="$1"
layouts="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"

for layout in $layouts; do
  hosts="${layout%x*}"
  ranks="${layout#*x}"
  n=$((hosts * ranks))
  logs=$(mktemp -d)
  start=$(date +%s.%N)
  CHORUS_DEBUG=INFO timeout 900 "$root/scripts/hosts.sh" -H "$hosts" -n "$ranks" --quiet \
    --timeout 600 --logs "$logs" --chorusrun "$bin/chorusrun" -- \
    "$bin/chorus-perf" -t allreduce -b 8 -e 8 -n 20 -w 5 >/dev/null 2>&1
  rc=$?
  end=$(date +%s.%N)
  python3 - "$logs" "$layout" "$n" "$ranks" "$rc" "$(echo "$end - $start" | bc -l)" <<'PY'
import glob, re, sys
logs, layout, n, per_host, rc, seconds = sys.argv[1:]
n, per_host = int(n), int(per_host)
requests, links, allreduce = {}, {}, "-"
for path in glob.glob(f"{logs}/job0.host*.log"):
    for line in open(path, errors="replace"):
        m = re.search(r"rank (\d+) of \d+ connected: .*; (\d+) store requests", line)
        if m:
            requests[int(m[1])] = int(m[2])
        m = re.search(r"rank (\d+) of \d+ had (\d+) TCP links", line)
        if m:
            links[int(m[1])] = int(m[2])
        f = line.split()
        if len(f) >= 10 and f[0] == "8" and f[3] == "sum":
            allreduce = f[5]
others = [v for r, v in requests.items() if r != 0]
common = max(set(others), key=others.count) if others else "-"
counts = list(links.values())
mean = f"{sum(counts) / len(counts):.1f}" if counts else "-"
print(f"| {layout} | {n} | {common}, {max(others) if others else '-'}, {requests.get(0, '-')} | "
      f"{mean}, {max(counts) if counts else '-'} ({len(counts)} of {n} ranks) | {n - per_host} | "
      f"{allreduce} | {float(seconds):.1f}{'' if rc == '0' else f' (exit {rc})'} |")
PY
  rm -rf "$logs"
done
