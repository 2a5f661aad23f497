#!/usr/bin/env bash
# Every test: the formatting check, the release build and its suite, warning-free builds of the
# other configurations a user may pick (Release, without torch, clang), the suite under
# AddressSanitizer+UBSan, the transport and communicator tests under ThreadSanitizer, then
# bounded libFuzzer runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
jobs="$(nproc)"

# Every tracked C/C++ source is formatted with the repository's .clang-format (clang-format 14).
mapfile -t sources < <(git -C "$root" ls-files '*.c' '*.h' '*.cpp' '*.hpp')
if ! format_log="$(cd "$root" && clang-format --dry-run -Werror "${sources[@]}" 2>&1)"; then
  echo "not formatted with .clang-format (run clang-format -i on them):"
  printf '%s\n' "$format_log" | grep -o '^[^:]*:[0-9]*:[0-9]*: error' | cut -d: -f1 | sort -u
  exit 1
fi

# CI treats warnings as errors in every build (a user's build does not: CHORUS_WERROR is OFF).
werror=-DCHORUS_WERROR=ON
# Tests that fail on purpose make the flight recorder dump; keep those dumps out of /tmp.
export CHORUS_TRACE_DIR="$root/build/traces"
mkdir -p "$CHORUS_TRACE_DIR"

"$root/scripts/build.sh" "$root/build" -DCHORUS_WITH_TORCH=ON $werror
(cd "$root/build" && ctest --output-on-failure -j "$jobs" --timeout 300)

# The other configurations a user may pick build without a warning too: their library, tools,
# training layer and Python module, not the tests. GCC warns at -O3 (Release) where it does not
# at -O2, so Release gets its own build. Without torch every file compiles as in a build with
# it (the RelWithDebInfo one above, the Release one here), so the build without torch is the
# clang one: it also shows that clang builds the library and the tools cleanly.
"$root/scripts/build.sh" "$root/build-release" -DCMAKE_BUILD_TYPE=Release \
  -DCHORUS_WITH_TORCH=ON -DCHORUS_BUILD_TESTS=OFF $werror
CC=clang CXX=clang++ "$root/scripts/build.sh" "$root/build-clang" -DCMAKE_BUILD_TYPE=Release \
  -DCHORUS_WITH_TORCH=OFF -DCHORUS_BUILD_TESTS=OFF $werror
# Installed without its training layer, Chorus refuses find_package(chorus COMPONENTS train).
"$root/tests/install/check_install.sh" "$root/build-clang" "$root/build-clang/install-check" OFF

# The sanitizer builds leave out the torch-facing parts (libtorch is not built with sanitizers).
"$root/scripts/build.sh" "$root/build-asan" -DCHORUS_SANITIZE=address,undefined \
  -DCHORUS_WITH_TORCH=OFF $werror
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$root/build-asan" && ctest --output-on-failure -j "$jobs" --timeout 600)

# ThreadSanitizer on the progress code: the transport and communicator tests (label "progress").
CHORUS_BUILD_TARGETS="test_transport_units test_transport_data test_transport_failures
  test_transport_stall_probe test_transport_liveness test_transport_progress_modes
  test_transport_p2p_matching test_comm_units test_comm_movement test_comm_faults test_comm_split
  test_shm_direct test_shm_alltoallv test_cma test_flight_recorder test_comm_p2p_tags
  test_mismatch_random test_shm_window test_capi_handle_table" \
  "$root/scripts/build.sh" "$root/build-tsan" -DCHORUS_SANITIZE=thread -DCHORUS_WITH_TORCH=OFF \
  $werror
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
(cd "$root/build-tsan" && ctest --output-on-failure -j "$jobs" --timeout 600 -L progress)

# libFuzzer over the store protocol, the connection handshake and the frame decoder: each
# harness for a bounded time from its committed corpus (crashes are kept as regressions).
"$root/scripts/fuzz.sh" "${CHORUS_FUZZ_SECONDS:-20}" "$root/build-fuzz"
