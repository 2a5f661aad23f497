#!/usr/bin/env bash
# tests/multihost/restart_rank.sh PROGRAM [ARGS...]: one rank of restart_job.sh. Every line
# the rank writes to stderr gets "SECONDS r<restart> rank <rank>: " in front (the clock as
# date +%s.%N). In the first run, rank $KILL_RANK kills itself with SIGKILL 0-0.9 s after the
# file $CK appeared, first writing the time to $KILLED_AT.
if [ "$RANK" = "$KILL_RANK" ] && [ "$CHORUS_RESTART_COUNT" = 0 ]; then
  (
    while [ ! -e "$CK" ]; do sleep 0.02; done
    sleep "0.$((RANDOM % 10))"
    date +%s.%N >"$KILLED_AT"
    kill -9 $$
  ) &
fi
exec "$@" 2> >(while IFS= read -r line; do
  echo "$(date +%s.%N) r$CHORUS_RESTART_COUNT rank $RANK: $line"
done >&2)
