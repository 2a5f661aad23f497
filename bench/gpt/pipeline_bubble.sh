#!/usr/bin/env bash
# bench/gpt/pipeline_bubble.sh BUILD_DIR [UNIT_MS]: every schedule's measured bubble under
# --synthetic-compute (each computation sleeps UNIT_MS per unit cost, 10 by default; messages
# are real) at p in {2, 4, 8} and m in {p, 2p, 4p, 8p}, beside the verifier's prediction and the
# formula, as a markdown table on stdout. P (default "2 4 8"), M_FACTORS ("1 2 4 8") and STEPS
# (6, the first a warm-up; the median of the others) change it.
set -euo pipefail
build="${1:?usage: pipeline_bubble.sh BUILD_DIR [UNIT_MS]}"
unit="${2:-10}"
echo "| schedule | p | m | v | measured | verifier | formula | measured − verifier | step (ms) |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in ${P:-2 4 8}; do
  for factor in ${M_FACTORS:-1 2 4 8}; do
    m=$((p * factor))
    for schedule in gpipe 1f1b interleaved zb-h1; do
      line=$(timeout 300 "$build/tools/chorusrun/chorusrun" -n "$p" \
        "$build/bench/gpt/pipeline_bubble" --schedule "$schedule" --micro-batches "$m" \
        --synthetic-compute "$unit" --steps "${STEPS:-6}")
      # "<schedule> p P m M v V: measured X verifier Y formula Z step S ms"
      echo "$line" | awk '{ sub(":", "", $7); printf "| %s | %s | %s | %s | %s | %s | %s | %+.1f pp | %s |\n", $1, $3, $5, $7, $9, $11, $13, 100 * ($9 - $11), $15 }'
    done
  done
done
