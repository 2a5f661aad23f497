#!/usr/bin/env bash
# bench/gpt/pipeline_bubble.sh BUILD_DIR [UNIT_MS]: every schedule's measured bubble under
# --synthetic-compute (each computation sleeps UNIT_MS per unit cost, 10 by default; messages
# are real; 0: real computations of a GPT with HIDDEN (256) and LAYERS_PER_CHUNK (2) blocks per
# chunk) at p in {2, 4, 8} and m in {p, 2p, 4p, 8p}, beside the verifier's prediction and the
# formula, with tokens/s and (real computations only) the micro-batches' worth of activations
# stage 0 and the last stage held at their peak, as a markdown table on stdout. P (default "2 4 8"), M_FACTORS ("1 2 4 8")
# and STEPS (6, the first a warm-up; the median of the others) change it.
set -euo pipefail
build="${1:?usage: pipeline_bubble.sh BUILD_DIR [UNIT_MS]}"
unit="${2:-10}"
model=()
if [ "$unit" = 0 ]; then model=(--hidden "${HIDDEN:-256}" --layers-per-chunk "${LAYERS_PER_CHUNK:-2}"); fi
echo "| schedule | p | m | v | measured | verifier | formula | measured − verifier | step (ms) | tokens/s | held, stage 0 | held, last stage |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for p in ${P:-2 4 8}; do
  for factor in ${M_FACTORS:-1 2 4 8}; do
    m=$((p * factor))
    for schedule in gpipe 1f1b interleaved zb-h1; do
      line=$(timeout 300 "$build/tools/chorusrun/chorusrun" -n "$p" \
        "$build/bench/gpt/pipeline_bubble" --schedule "$schedule" --micro-batches "$m" \
        --synthetic-compute "$unit" --steps "${STEPS:-6}" "${model[@]}")
      # "<schedule> p P m M v V: measured X verifier Y formula Z step S ms tokens/s T peak
      #  B0,B1,... held H0,H1,..."
      echo "$line" | awk -v real="$([ "$unit" = 0 ] && echo 1 || echo 0)" '{ sub(":", "", $7);
        n = split($22, held, ","); if (!real) { held[1] = "-"; held[n] = "-" }
        printf "| %s | %s | %s | %s | %s | %s | %s | %+.1f pp | %s | %s | %s | %s |\n", $1, $3, $5, $7, $9, $11, $13, 100 * ($9 - $11), $15, $18, held[1], held[n] }'
    done
  done
done
