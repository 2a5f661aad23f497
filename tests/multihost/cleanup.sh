#!/usr/bin/env bash
# tests/multihost/cleanup.sh CHORUSRUN: scripts/hosts.sh leaves nothing behind, whether its
# job fails or it is stopped by SIGINT, SIGTERM or SIGKILL (then its watcher cleans up): no
# namespace of its own, no process it started in them, no temporary directory. Exit status 77
# (ctest's skip) when this machine cannot simulate hosts.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: cleanup.sh CHORUSRUN" >&2; exit 2; }
chorusrun=$1
root="$(cd "$(dirname "$0")/../.." && pwd)"
hosts_sh=("$root/scripts/hosts.sh" --hosts 2 --ranks-per-host 2 --rate 1gbit --quiet
  --chorusrun "$chorusrun")

# hosts.sh makes its temporary directory in TMPDIR, which must be empty again after each run.
TMPDIR="$(mktemp -d)"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

namespaces_of() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^chorushosts-$1-" || true; }
pids_of() { for ns in $(namespaces_of "$1"); do ip netns pids "$ns" 2>/dev/null; done; }

# gone PID PIDS...: within 10 s, no namespace of hosts.sh PID is left, no process of PIDS and
# nothing in TMPDIR.
gone() {
  local owner=$1
  shift
  for _ in $(seq 100); do
    if [ -z "$(namespaces_of "$owner")" ] && ! kill -0 "$@" 2>/dev/null &&
      [ -z "$(ls -A "$TMPDIR")" ]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# stopped_by SIGNAL: starts a job of 4 ranks sleeping 60 s beside a --during command sleeping
# as long, sends SIGNAL to hosts.sh once all five sleep, and checks that everything is gone.
stopped_by() {
  # A background job of a script ignores SIGINT unless told otherwise.
  env --default-signal=INT "${hosts_sh[@]}" --during "sleep 60" -- sleep 60 >/dev/null 2>&1 &
  local pid=$! sleepers=""
  for _ in $(seq 100); do
    sleepers="$(pids_of "$pid" | xargs -r ps -o pid= -o comm= -p | awk '$2 == "sleep" {print $1}')"
    [ "$(echo "$sleepers" | grep -c .)" -eq 5 ] && break
    sleep 0.1
  done
  [ "$(echo "$sleepers" | grep -c .)" -eq 5 ] || { echo "cleanup: the job never started"; exit 1; }
  kill "-$1" "$pid"
  wait "$pid" 2>/dev/null
  # shellcheck disable=SC2086  # one pid per word
  gone "$pid" $sleepers ||
    { echo "cleanup: after SIG$1, namespaces, processes or files are left"; exit 1; }
  echo "cleanup: SIG$1 left nothing behind"
}

"${hosts_sh[@]}" -- true >/dev/null 2>&1
status=$?
if [ "$status" -eq 77 ]; then
  "${hosts_sh[@]}" -- true
  echo "SKIPPED: this machine cannot simulate hosts (see the line above)"
  exit 77
fi
[ "$status" -eq 0 ] || { echo "cleanup: a job of 'true' failed (status $status)"; exit 1; }

"${hosts_sh[@]}" -- false >/dev/null 2>&1 &
pid=$!
wait "$pid"
status=$?
[ "$status" -eq 1 ] || { echo "cleanup: a job of 'false' ended with $status, not 1"; exit 1; }
gone "$pid" || { echo "cleanup: a failed job left namespaces or files behind"; exit 1; }
echo "cleanup: a failed job left nothing behind"

stopped_by INT
stopped_by TERM
stopped_by KILL
