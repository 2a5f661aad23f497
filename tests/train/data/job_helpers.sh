# Helpers of the chorus-train job tests (sourced by train_job_test.sh, gpt_job_test.sh and
# compose_job_test.sh): $work, a scratch directory removed when the test exits, and the checks
# below.

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# Prints "step loss" for every progress line of a log.
losses() { awk '$1 == "epoch" { print $4, $6 }' "$1"; }

# same_losses A B TOLERANCE: the logs have the same steps, their losses within TOLERANCE
# (relative).
same_losses() {
  [ "$(losses "$1" | wc -l)" -eq "$(losses "$2" | wc -l)" ] || fail "different step counts"
  paste <(losses "$1") <(losses "$2") | awk -v tol="$3" '
    { d = $2 - $4; if (d < 0) d = -d }
    $1 != $3 || d > tol * $2 { print "step " $1 ": " $2 " vs " $4; bad = 1 }
    END { exit bad }' || fail "losses differ beyond $3"
}

# loss_fell LOG: the log has progress lines and its last loss is below its first.
loss_fell() {
  local first last
  first="$(losses "$1" | head -1 | cut -d' ' -f2)"
  last="$(losses "$1" | tail -1 | cut -d' ' -f2)"
  [ -n "$first" ] && [ -n "$last" ] || fail "no progress lines"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not fall: $first -> $last"
}

# refused NAME EXPECTED COMMAND...: COMMAND fails, its stderr contains EXPECTED (one line, no
# backtrace) and it printed no progress line (it refused before the first step).
refused() {
  local name="$1" expected="$2"
  shift 2
  if "$@" >"$work/$name.out" 2>"$work/$name.err"; then fail "$name: accepted: $*"; fi
  cat "$work/$name.out" "$work/$name.err"
  grep -qF -- "$expected" "$work/$name.err" || fail "$name: expected the error '$expected'"
  if grep -q "^epoch " "$work/$name.out"; then fail "$name: trained before refusing"; fi
  if grep -q "frame #" "$work/$name.err"; then fail "$name: printed a backtrace"; fi
}

# free_port_pair: prints a port P such that P (a job's master port) and P + 1 (its store port)
# are both free on 127.0.0.1 now.
free_port_pair() {
  python3 -c 'import random, socket
while True:  # two consecutive free ports: the master port and the store port after it
    p = random.randrange(20000, 60000)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p))
        b = socket.socket(); b.bind(("127.0.0.1", p + 1))
        print(p); break
    except OSError: pass'
}
