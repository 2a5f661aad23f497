#!/usr/bin/env bash
# tests/support/restart_rank.sh PROGRAM [ARGS...]: one rank of a chorusrun --max-restarts test
# (train_job_restart, multihost_restart). Every line the rank writes to stderr gets
# "SECONDS r<restart> rank <rank>: " in front (the clock as date +%s.%N). In the first run,
# rank $KILL_RANK kills itself with SIGKILL 0-0.09 s after the file $CK appeared (well inside
# the training that follows the first checkpoint, even on a fast machine), first writing
# the time to $KILLED_AT when that is set; the watcher gives up when the rank is gone first.
if [ "$RANK" = "$KILL_RANK" ] && [ "$CHORUS_RESTART_COUNT" = 0 ]; then
  (
    while [ ! -e "$CK" ]; do
      kill -0 $$ 2>/dev/null || exit 0
      sleep 0.02
    done
    sleep "0.0$((RANDOM % 10))"
    kill -0 $$ 2>/dev/null || exit 0
    [ -z "${KILLED_AT:-}" ] || date +%s.%N >"$KILLED_AT"
    kill -9 $$
  ) &
fi
exec "$@" 2> >(while IFS= read -r line; do
  echo "$(date +%s.%N) r$CHORUS_RESTART_COUNT rank $RANK: $line"
done >&2)
