#!/usr/bin/env bash
# bench/setup-peers.sh: installs the peers bench/compare.py compares Chorus with
# (Debian 12 packages): Open MPI (mpicc, mpirun) and Gloo (headers + libgloo).
# The chart is written as SVG by bench/charts.py, so no plotting package is needed.
set -euo pipefail
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
packages=(openmpi-bin libopenmpi-dev libgloo-dev g++ python3)
"${sudo[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
mpirun --version | head -1
test -f /usr/include/gloo/allreduce.h && echo "gloo headers: /usr/include/gloo"
