#!/usr/bin/env bash
# check_install.sh <build-dir> <work-dir>: installs the build into a prefix, then builds and
# runs a consumer with find_package(chorus), and compiles one with pkg-config.
set -euo pipefail
build="$1"
work="$2"
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
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$here/consumer/consumer.c" $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs chorus) -o "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
