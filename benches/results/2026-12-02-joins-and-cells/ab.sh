#!/bin/bash
# usage: ab.sh ROUNDS BIN1 BIN2 [...] -- alternating q100.sh runs; per binary: cpu/query list and median, median of per-run median wall
R=$1; shift
for r in $(seq 1 $R); do for b in "$@"; do
  /tmp/q100.sh $b > /tmp/ab.one 2>&1; out=$(head -1 /tmp/ab.one)
  echo "$b $out" >> /tmp/ab.log.$$
done; done
for b in "$@"; do
  grep "^$b " /tmp/ab.log.$$ | python3 -c "
import sys, statistics as st
cpus=[]; walls=[]
for l in sys.stdin:
    f=l.split(); cpus.append(int(f[-2])); ws=sorted(int(x) for x in f[1:9]); walls.append(st.median(ws))
print('$b', 'cpu med', st.median(cpus), 'min', min(cpus), 'wall med-of-medians', st.median(walls), 'min', min(walls), 'cpus', cpus)
"
done
rm -f /tmp/ab.log.$$
