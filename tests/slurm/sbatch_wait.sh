#!/usr/bin/env bash
# tests/slurm/sbatch_wait.sh SBATCH_ARGS...: `sbatch SBATCH_ARGS`, then waits for the job to end
# (asking squeue every 0.2 s: `sbatch --wait` polls for up to 30 s more), at most
# SBATCH_WAIT_SECONDS (default 120; then it cancels the job); exits 0 when it completed, else
# prints its state and exits 1.
set -uo pipefail
id="$(sbatch --parsable "$@")" || { echo "sbatch_wait.sh: sbatch $* failed"; exit 1; }
id="${id%%;*}"
deadline=$((SECONDS + ${SBATCH_WAIT_SECONDS:-120}))
while squeue -h -j "$id" 2>/dev/null | grep -q .; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    scancel "$id" 2>/dev/null
    echo "sbatch_wait.sh: job $id (sbatch $*) still running after ${SBATCH_WAIT_SECONDS:-120} s; cancelled"
    exit 1
  fi
  sleep 0.2
done
state="$(scontrol show job "$id" | grep -o 'JobState=[A-Z_]*\|ExitCode=[0-9:]*' | tr '\n' ' ')"
case "$state" in
  *JobState=COMPLETED*) exit 0 ;;
  *) echo "sbatch_wait.sh: job $id (sbatch $*) ended with $state"; exit 1 ;;
esac
