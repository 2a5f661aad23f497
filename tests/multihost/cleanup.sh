#!/usr/bin/env bash
# tests/multihost/cleanup.sh CHORUSRUN: scripts/hosts.sh leaves nothing behind, whether its
# job fails or it is stopped by SIGINT, SIGTERM or SIGKILL (then its watcher cleans up): no
# namespace of its own, no process it started in them, no temporary directory. Exit status 77
# (ctest's skip) when this machine cannot simulate hosts.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: cleanup.sh CHORUSRUN" >&2; exit 2; }
chorusrun=$1
root="$(cd "$(dirname "$0")/../.." && pwd)"
namespace_prefix=chorushosts
harness=("$root/scripts/hosts.sh" --hosts 2 --ranks-per-host 2 --rate 1gbit --quiet
  --chorusrun "$chorusrun")
# shellcheck source=../support/harness_cleanup.sh
source "$root/tests/support/harness_cleanup.sh"

skip_unless_runs
fails_with 1 -- false
# 4 ranks sleeping 60 s beside a --during command sleeping as long.
for signal in INT TERM KILL; do stopped_by "$signal" 5 --during "sleep 60" -- sleep 60; done
