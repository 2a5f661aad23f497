#!/usr/bin/env bash
# tests/slurm/cleanup.sh: scripts/slurm.sh passes its command's exit status on and leaves
# nothing behind, whether the command fails or the script is stopped by SIGINT, SIGTERM or
# SIGKILL (then its watcher cleans up): no namespace of its own, no daemon, no task, no state
# directory. Exit status 77 (ctest's skip) where Slurm cannot be started.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
slurm_sh=("$root/scripts/slurm.sh" --nodes 2 --cpus 2 --timeout 120)

# slurm.sh makes its state directory in TMPDIR, which must be empty again after each run.
TMPDIR="$(mktemp -d)"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

namespaces_of() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^chorusslurm-$1-" || true; }
pids_of() { for ns in $(namespaces_of "$1"); do ip netns pids "$ns" 2>/dev/null; done; }

# gone PID PIDS...: within 15 s, no namespace of slurm.sh PID is left, no process of PIDS and
# nothing in TMPDIR.
gone() {
  local owner=$1
  shift
  for _ in $(seq 150); do
    if [ -z "$(namespaces_of "$owner")" ] && ! kill -0 "$@" 2>/dev/null &&
      [ -z "$(ls -A "$TMPDIR")" ]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# stopped_by SIGNAL: starts a job step of 4 tasks sleeping 60 s, sends SIGNAL to slurm.sh once
# all four sleep, and checks that the tasks, the daemons and everything else are gone.
stopped_by() {
  # A background job of a script ignores SIGINT unless told otherwise.
  env --default-signal=INT "${slurm_sh[@]}" -- srun -n 4 sleep 60 >/dev/null 2>&1 &
  local pid=$! sleepers="" daemons=""
  for _ in $(seq 300); do
    sleepers="$(pids_of "$pid" | xargs -r ps -o pid= -o comm= -p | awk '$2 == "sleep" {print $1}')"
    [ "$(echo "$sleepers" | grep -c .)" -eq 4 ] && break
    sleep 0.1
  done
  [ "$(echo "$sleepers" | grep -c .)" -eq 4 ] || { echo "cleanup: the job never started"; exit 1; }
  daemons="$(pids_of "$pid" | xargs -r ps -o pid= -o comm= -p | awk '$2 ~ /^slurm/ {print $1}')"
  [ "$(echo "$daemons" | grep -c .)" -ge 3 ] || { echo "cleanup: no daemons found"; exit 1; }
  kill "-$1" "$pid"
  wait "$pid" 2>/dev/null
  # shellcheck disable=SC2086  # one pid per word
  gone "$pid" $sleepers $daemons ||
    { echo "cleanup: after SIG$1, namespaces, processes or files are left"; exit 1; }
  echo "cleanup: SIG$1 left nothing behind"
}

"${slurm_sh[@]}" -- true >/dev/null 2>&1
status=$?
if [ "$status" -eq 77 ]; then
  "${slurm_sh[@]}" -- true
  echo "SKIPPED: Slurm cannot be started on this machine (see the line above)"
  exit 77
fi
[ "$status" -eq 0 ] || { echo "cleanup: slurm.sh -- true failed (status $status)"; exit 1; }

"${slurm_sh[@]}" -- srun -n 4 sh -c 'exit 3' >/dev/null 2>&1 &
pid=$!
wait "$pid"
status=$?
[ "$status" -eq 3 ] || { echo "cleanup: a step of 'exit 3' ended with $status, not 3"; exit 1; }
gone "$pid" || { echo "cleanup: a failed step left namespaces or files behind"; exit 1; }
echo "cleanup: a failed step left nothing behind, its status passed on"

stopped_by INT
stopped_by TERM
stopped_by KILL
