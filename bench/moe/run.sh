#!/usr/bin/env bash
# bench/moe/run.sh BUILD_DIR [MPI_COLLECTIVES]: the MoE benchmark matrix of
# bench/results/*-moe.md, one moe_bench line per run, then Chorus's uneven alltoallv against
# MPI_Alltoallv (bench/peers/mpi_collectives.c, built with mpicc when not given) at 2, 4 and 8
# ranks, 4 KiB to 16 MiB per rank.
set -euo pipefail
build="$1"
mpi="${2:-}"
run="$build/tools/chorusrun/chorusrun"
bench="$build/bench/moe/moe_bench"
perf="$build/tools/chorus-perf/chorus-perf"
model=(--experts 8 --top-k 2 --layers 2 --hidden 128 --heads 4 --seq 128 --batch 8
  --steps 10 --warmup 2)
for ep in 1 2 4; do  # tokens/s of the MoE GPT, dp = ep
  timeout 600 "$run" -n "$ep" "$bench" --ep "$ep" "${model[@]}" --capacity 125
done
for skew in 0 50 90; do  # the layer alone, router forced to expert 0
  for capacity in 125 0; do
    timeout 600 "$run" -n 4 "$bench" --ep 4 "${model[@]}" --skew "$skew" --capacity "$capacity"
  done
done
if [ -z "$mpi" ]; then
  mpi="$(mktemp -d)/mpi_collectives"
  mpicc -O2 -o "$mpi" "$(dirname "$0")/../peers/mpi_collectives.c" -lm
fi
for n in 2 4 8; do
  timeout 600 "$run" -n "$n" "$perf" -t alltoallv -b 4K -e 16M -f 4 -n 20 -w 5
  timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$mpi" \
    -t alltoallv -b 4K -e 16M -f 4 -n 20 -w 5
done
