#!/usr/bin/env bash
# check_install.sh <build-dir> <work-dir> [ON|OFF]: installs the build into a prefix, then
# builds and runs consumers with find_package(chorus) (shared and static library), compiles
# one with pkg-config (shared, and static with its private dependencies), and, when the third
# argument says the build has its training layer (ON), a libtorch program that links
# chorus::train (find_package(chorus COMPONENTS train)); without it (OFF), asking for that
# component must fail with a sentence that says why.
set -euo pipefail
build="$1"
work="$2"
torch="${3:-OFF}"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/chorus/chorus.h"
test -f "$work/prefix/lib/pkgconfig/chorus.pc" || test -f "$work/prefix/lib/x86_64-linux-gnu/pkgconfig/chorus.pc"
cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
libdir="$(dirname "$(find "$work/prefix" -name 'libchorus.so' | head -1)")"
LD_LIBRARY_PATH="$libdir" "$work/consumer/consumer_c"
LD_LIBRARY_PATH="$libdir" "$work/consumer/consumer_cxx"
"$work/consumer/consumer_cxx_static"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc "$here/consumer/consumer.c" $(pkg-config --cflags --libs chorus) -o "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
# Static: libchorus.a followed by what `pkg-config --static` says it needs.
static_libs="$(pkg-config --static --libs chorus | sed 's/-lchorus\b/-l:libchorus.a/')"
c++ -std=c++20 "$here/consumer/consumer.cpp" $(pkg-config --cflags chorus) $static_libs \
  -o "$work/consumer_pc_static"
"$work/consumer_pc_static"

train_configure=(cmake -S "$here/train_consumer" -B "$work/train_consumer"
  -DCMAKE_PREFIX_PATH="$work/prefix")
if [ "$torch" = ON ]; then
  "${train_configure[@]}" > "$work/train_configure.log"
  cmake --build "$work/train_consumer" > "$work/train_build.log"
  LD_LIBRARY_PATH="$libdir" "$work/train_consumer/train_consumer"
elif "${train_configure[@]}" > "$work/train_configure.log" 2>&1; then
  echo "find_package(chorus COMPONENTS train) succeeded on a build without the training layer"
  exit 1
else
  # CMake wraps the sentence: compare with the lines joined.
  tr -s ' \n' ' ' < "$work/train_configure.log" | grep -q "built without libtorch" || {
    cat "$work/train_configure.log"
    exit 1
  }
  echo "train component: refused as expected (built without libtorch)"
fi
