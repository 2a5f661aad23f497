#!/usr/bin/env bash
# The main job: 4 local ranks run chorus-perf over every collective, checking every result.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh" "$root/build" -DCHORUS_BUILD_TESTS=OFF
"$root/build/tools/chorusrun/chorusrun" -n 4 --tag-output \
  "$root/build/tools/chorus-perf/chorus-perf" -t all -b 8 -e 4M -f 8 -n 5 -w 2 -c 1 "$@"
