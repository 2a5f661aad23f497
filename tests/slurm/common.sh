# shellcheck shell=bash disable=SC2154  # test_name is the sourcing script's
# Sourced by the slurm test scripts after they set test_name: the repository's root, a log
# directory removed at exit, run_slurm and fail.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
logs="$(mktemp -d /tmp/chorus-slurm.XXXXXX)"
trap 'rm -rf "$logs"' EXIT

# fail SENTENCE: says what is wrong, shows the end of every log, and exits 1.
fail() {
  echo "$test_name: $1"
  for f in "$logs"/* "$logs"/daemons/*.log; do
    [ -f "$f" ] && { echo "== ${f##*/}"; tail -n 20 "$f"; }
  done
  exit 1
}

# run_slurm ARGS...: scripts/slurm.sh ARGS, keeping the daemons' logs in $logs/daemons; exits
# 77 (ctest's skip) where Slurm cannot be started here and fails when the command did.
run_slurm() {
  "$root/scripts/slurm.sh" --logs "$logs/daemons" "$@"
  local status=$?
  if [ "$status" -eq 77 ]; then
    echo "SKIPPED: Slurm cannot be started on this machine (see the line above)"
    exit 77
  fi
  [ "$status" -eq 0 ] || fail "the command under Slurm exited $status"
}
