#!/usr/bin/env bash
# scripts/run-train.sh [chorus-train options...]: the training job end to end. Installs what
# it needs (scripts/setup-debian.sh: libtorch, OpenBLAS, Debian's Fashion-MNIST package),
# builds chorusrun and chorus-train with the training layer (-DCHORUS_WITH_TORCH=ON) in
# $CHORUS_BUILD_DIR (default: build), then trains the Fashion-MNIST MLP (784-1024x3-10,
# SGD with momentum) with Chorus DDP on 4 local ranks, one torch thread each, and prints
# progress lines and the final test accuracy. Extra options go to chorus-train (see
# chorus-train --help), e.g. `scripts/run-train.sh --model lstm --epochs 2`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CHORUS_BUILD_DIR:-$root/build}"
"$root/scripts/setup-debian.sh"
CHORUS_BUILD_TARGETS="chorusrun chorus-train" "$root/scripts/build.sh" "$build" -DCHORUS_WITH_TORCH=ON
export OMP_NUM_THREADS=1
# OpenBLAS's own kernels for this CPU, where Debian's OpenBLAS does not know it (see the script).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  coretype="$("$root/scripts/openblas-coretype.sh")"
  if [ -n "$coretype" ]; then export OPENBLAS_CORETYPE="$coretype"; fi
fi
exec "$build/tools/chorusrun/chorusrun" -n 4 "$build/tools/chorus-train/chorus-train" \
  --model mlp --epochs 2 --batch 64 --log-every 100 "$@"
