#!/usr/bin/env bash
# Installs what building and testing Chorus needs on a fresh Debian 12 machine.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
packages=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
  # OpenSSL's libcrypto (libssl3 at run time): the handshake's SHA-256, HMAC and random bytes
  libssl-dev
  # the formatting check of scripts/test.sh
  clang-format
  # the training layer and the torch backend: libtorch, torch for /usr/bin/python3, pybind11,
  # a fast BLAS (torch falls back to the slow reference BLAS without it), pytest, the data
  libtorch-dev python3-torch pybind11-dev libopenblas0 python3-pytest dataset-fashion-mnist zlib1g-dev
  # the English text corpus of chorus-train --model gpt (/usr/share/games/fortunes)
  fortunes
  # the libFuzzer harnesses (scripts/fuzz.sh): clang and its fuzzer/sanitizer runtimes
  clang-14 libclang-rt-14-dev
  # hosts simulated in network namespaces (scripts/hosts.sh, tests labelled multihost): ip,
  # tc, ss; unshare and mount (util-linux, mount) are part of every Debian system
  iproute2
  # a Slurm cluster of simulated hosts (scripts/slurm.sh, tests labelled slurm): slurmctld,
  # slurmd and the client commands; the script starts its own daemons with its own
  # configuration, so the system's (unconfigured) Slurm services stay idle
  slurm-wlm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
