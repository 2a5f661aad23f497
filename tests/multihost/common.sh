# shellcheck shell=bash disable=SC2154  # test_name is the sourcing script's
# Sourced by the multihost test scripts after they set test_name: the repository's root, a log
# directory removed at exit, run_hosts and fail.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
logs="$(mktemp -d /tmp/chorus-multihost.XXXXXX)"
trap 'rm -rf "$logs"' EXIT

# fail SENTENCE: says what is wrong, shows the end of every host's and --during's output, and
# exits 1.
fail() {
  echo "$test_name: $1"
  for f in "$logs"/*.log; do echo "== ${f##*/}"; tail -n 15 "$f"; done
  exit 1
}

# run_hosts ARGS...: scripts/hosts.sh ARGS, keeping the output in $logs (jobJ.hostI.log,
# jobJ.during.log); exits 77 (ctest's skip) where this machine cannot simulate hosts and fails
# when a job did.
run_hosts() {
  "$root/scripts/hosts.sh" --logs "$logs" --quiet "$@"
  local status=$?
  if [ "$status" -eq 77 ]; then
    echo "SKIPPED: this machine cannot simulate hosts (see the line above)"
    exit 77
  fi
  [ "$status" -eq 0 ] || fail "a job failed (the summary lines above say where)"
}
