#!/usr/bin/env bash
# bench/small_before_after.sh BEFORE_BUILD AFTER_BUILD: small calls of two builds, alternated
# (before, then after, per repeat and rank count): 2/4/8 ranks, every collective, 16 B..4 KiB,
# 20000 iterations (8 ranks: 5000), 5 repeats. Prints "repeat before|after ranks collective
# size time_us"; run it on a quiet machine.
set -u
[ $# = 2 ] || { echo "usage: $0 BEFORE_BUILD AFTER_BUILD" >&2; exit 2; }
declare -A builds=([before]="$1" [after]="$2")
for rep in 1 2 3 4 5; do
  for n in 2 4 8; do
    it=20000; [ $n = 8 ] && it=5000
    for b in before after; do
      B=${builds[$b]}
      timeout 600 $B/tools/chorusrun/chorusrun -n $n $B/tools/chorus-perf/chorus-perf -t all -b 16 -e 4K -f 4 \
        -n $it -w 500 -c 0 2>/dev/null | awk -v b=$b -v n=$n -v r=$rep '/^# Collective:/{c=$3} /^ +[0-9]/{print r, b, n, c, $1, $6}'
    done
  done
done
