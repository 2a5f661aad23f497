# shellcheck shell=bash
# Sourced by the cleanup tests of the harnesses that build hosts from namespaces
# (tests/multihost/cleanup.sh: scripts/hosts.sh; tests/slurm/cleanup.sh: scripts/slurm.sh).
# The caller sets `namespace_prefix` (the harness's, without its pid: chorushosts) and
# `harness` (the harness's command line, an array). TMPDIR becomes a fresh directory, which
# the harness's temporary files must leave empty again, removed at exit.
TMPDIR="$(mktemp -d)"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

namespaces_of() {  # namespaces_of PID: the namespaces of the harness run PID
  ip netns list 2>/dev/null | awk '{print $1}' | grep "^$namespace_prefix-$1-" || true
}
pids_of() { for ns in $(namespaces_of "$1"); do ip netns pids "$ns" 2>/dev/null; done; }

# gone PID PIDS...: within 15 s, no namespace of harness run PID is left, no process of PIDS
# and nothing in TMPDIR.
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

# stopped_by SIGNAL SLEEPERS ARGS...: runs `harness ARGS` (which starts SLEEPERS processes
# called sleep), sends SIGNAL to the harness once they all sleep, and checks that every
# process of its namespaces (the sleepers, and the daemons and launchers beside them), its
# namespaces and its files are gone.
stopped_by() {
  local signal=$1 count=$2
  shift 2
  # A background job of a script ignores SIGINT unless told otherwise.
  env --default-signal=INT "${harness[@]}" "$@" >/dev/null 2>&1 &
  local pid=$! sleepers="" all=""
  for _ in $(seq 300); do
    sleepers="$(pids_of "$pid" | xargs -r ps -o pid= -o comm= -p | awk '$2 == "sleep" {print $1}')"
    [ "$(echo "$sleepers" | grep -c .)" -eq "$count" ] && break
    sleep 0.1
  done
  [ "$(echo "$sleepers" | grep -c .)" -eq "$count" ] ||
    { echo "cleanup: the job never started"; exit 1; }
  all="$(pids_of "$pid")"
  kill "-$signal" "$pid"
  wait "$pid" 2>/dev/null
  # shellcheck disable=SC2086  # one pid per word
  gone "$pid" $all ||
    { echo "cleanup: after SIG$signal, namespaces, processes or files are left"; exit 1; }
  echo "cleanup: SIG$signal left nothing behind"
}

# skip_unless_runs: runs `harness -- true`; exits 77 (ctest's skip) with the harness's reason
# when it cannot run here, 1 when it fails.
skip_unless_runs() {
  "${harness[@]}" -- true >/dev/null 2>&1
  local status=$?
  if [ "$status" -eq 77 ]; then
    "${harness[@]}" -- true
    echo "SKIPPED: ${harness[0]##*/} cannot run on this machine (see the line above)"
    exit 77
  fi
  [ "$status" -eq 0 ] || { echo "cleanup: a job of 'true' failed (status $status)"; exit 1; }
}

# fails_with STATUS ARGS...: `harness ARGS` exits with STATUS and leaves nothing behind.
fails_with() {
  local expected=$1
  shift
  "${harness[@]}" "$@" >/dev/null 2>&1 &
  local pid=$!
  wait "$pid"
  local status=$?
  [ "$status" -eq "$expected" ] ||
    { echo "cleanup: '$*' ended with $status, not $expected"; exit 1; }
  gone "$pid" || { echo "cleanup: '$*' left namespaces or files behind"; exit 1; }
  echo "cleanup: '$*' ended with $expected and left nothing behind"
}
