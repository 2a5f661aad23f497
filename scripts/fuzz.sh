#!/usr/bin/env bash
# scripts/fuzz.sh [seconds-per-harness] [build-dir]: builds the libFuzzer harnesses of
# tests/fuzz/ with clang (ASan+UBSan, coverage on the whole library) and runs each one
# for a bounded time (default 60 s) starting from its committed seed corpus.
# New interesting inputs go to a scratch corpus under the build directory, never into
# the source tree; a crash leaves its input in <build-dir>/fuzz-artifacts/ and makes
# this script fail: fix the bug, then copy the input to tests/fuzz/regressions/<harness>/
# so test_fuzz_inputs replays it in every build. scripts/setup-debian.sh installs clang.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
dir="${2:-$root/build-fuzz}"
harnesses=(store_request handshake frames)

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCHORUS_BUILD_FUZZ=ON -DCHORUS_BUILD_TOOLS=OFF -DCHORUS_WITH_TORCH=OFF \
  "${launcher[@]}" >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=(--target "fuzz_$h"); done
cmake --build "$dir" -j 2 "${targets[@]}"

mkdir -p "$dir/fuzz-artifacts"
status=0
for h in "${harnesses[@]}"; do
  scratch="$dir/fuzz-corpus/$h"
  mkdir -p "$scratch"
  regressions=()  # replayed first, so a fixed crash that comes back fails at once
  if [ -d "$root/tests/fuzz/regressions/$h" ]; then regressions=("$root/tests/fuzz/regressions/$h"); fi
  echo "== fuzz_$h for ${seconds}s"
  # allocator_may_return_null: an allocation too big to satisfy must reach the code's
  # own bad_alloc handling; -malloc_limit_mb makes any single allocation over 1 GiB a finding.
  if ! ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/tests/fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/fuzz-artifacts/$h-" \
    "$scratch" "$root/tests/fuzz/corpus/$h" "${regressions[@]}" 2>"$dir/fuzz-$h.log"; then
    echo "fuzz_$h found a crash; see $dir/fuzz-$h.log and $dir/fuzz-artifacts/"
    tail -n 40 "$dir/fuzz-$h.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|DONE" "$dir/fuzz-$h.log" | tail -n 2
  fi
done
exit $status
