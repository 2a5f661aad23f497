#!/usr/bin/env bash
# scripts/build.sh <build-dir> [extra cmake args...]: configures and builds everything
# (or only the targets listed in CHORUS_BUILD_TARGETS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"
shift
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
targets=()
for t in ${CHORUS_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
