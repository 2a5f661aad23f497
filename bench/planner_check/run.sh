#!/usr/bin/env bash
# bench/planner_check/run.sh BUILD_DIR: chorus-plan against measured chorus-train steps
# (planner_check.py): 2 ranks with real compute, 4 and 8 ranks with --synthetic-compute MS
# (SYNTHETIC_MS, 2 by default), LAYOUTS (10) layouts of STEPS (6) steps each; markdown on
# stdout.
set -euo pipefail
build="${1:?usage: run.sh BUILD_DIR}"
here="$(dirname "$0")"
layouts="${LAYOUTS:-10}"
steps="${STEPS:-6}"
python3 "$here/planner_check.py" --build "$build" --ranks 2 --layouts "$layouts" --steps "$steps"
for ranks in 4 8; do
  python3 "$here/planner_check.py" --build "$build" --ranks "$ranks" --layouts "$layouts" \
    --steps "$steps" --synthetic-compute "${SYNTHETIC_MS:-2}"
done
