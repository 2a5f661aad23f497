#!/usr/bin/env bash
# scripts/build.sh <build-dir> [extra cmake args...]: configures and builds everything
# (or only the targets listed in CHORUS_BUILD_TARGETS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"
shift
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# ccache, when the machine has it, makes rebuilds in fresh clones cheap (not required).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@"
targets=()
for t in ${CHORUS_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
