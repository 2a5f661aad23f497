#!/usr/bin/env bash
# scripts/openblas-coretype.sh: prints the OPENBLAS_CORETYPE this machine needs, or nothing.
#
# Debian 12's OpenBLAS (0.3.21) picks its kernels by CPU model. On a model it does not know
# (the Sapphire Rapids Xeons of this project's machines) it falls back to its generic SSE3
# kernels ("Prescott"): torch's matrix products then run 3-4x slower, and every training
# benchmark measures that. Only in that case this prints the kernels the CPU's flags allow.
# Run it with OPENBLAS_CORETYPE unset (it asks OpenBLAS what it picks by itself).
set -euo pipefail
core="$(/usr/bin/python3 -c 'import ctypes
name = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
name.restype = ctypes.c_char_p
print(name().decode())' 2>/dev/null)" || exit 0
[ "$core" = "Prescott" ] || exit 0
flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
if [[ "$flags" == *" avx512_bf16 "* ]]; then
  echo COOPERLAKE
elif [[ "$flags" == *" avx512vl "* ]]; then
  echo SKYLAKEX
elif [[ "$flags" == *" avx2 "* ]]; then
  echo HASWELL
fi
