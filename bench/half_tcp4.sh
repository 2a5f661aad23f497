#!/usr/bin/env bash
# bench/half_tcp4.sh [build]: fp16 / bf16 reductions against fp32 at equal bytes (1 MiB and
# 64 MiB; 3 repeats, dtype order rotated), by default over TCP at 4 ranks for all-reduce,
# reduce-scatter and reduce. TRANSPORTS (shm tcp), RANKS and COLLECTIVES widen or narrow the
# matrix, e.g. TRANSPORTS="shm tcp" RANKS="2 4" COLLECTIVES=allreduce bench/half_tcp4.sh build.
# Prints "transport ranks repeat collective dtype size time_us algorithm"; run it on a quiet
# machine.
set -u
B=${1:-build}
for rep in 1 2 3; do
  for tr in ${TRANSPORTS:-tcp}; do
    for n in ${RANKS:-4}; do
      for t in ${COLLECTIVES:-allreduce reducescatter reduce}; do
        order=(float32 float16 bfloat16)
        for k in $(seq 1 $rep); do order=("${order[@]:1}" "${order[0]}"); done
        for d in "${order[@]}"; do
          CHORUS_TRANSPORT=$tr OMP_NUM_THREADS=1 timeout 300 $B/tools/chorusrun/chorusrun -n $n \
            $B/tools/chorus-perf/chorus-perf -t $t -d $d -b 1M -e 64M -f 64 -n 10 -w 2 -c 0 \
            2>/dev/null |
            awk -v tr=$tr -v n=$n -v t=$t -v d=$d -v r=$rep \
              '/^ +[0-9]/{print tr, n, r, t, d, $1, $6, $NF}'
        done
      done
    done
  done
done
