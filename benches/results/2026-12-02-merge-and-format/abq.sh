#!/bin/bash
# usage: abq.sh ROUNDS STEP QUERY BIN1 BIN2 ... -- alternating qstep.sh runs; cpu/query median per binary
R=$1; STEP=$2; Q=$3; shift 3
for r in $(seq 1 $R); do for b in "$@"; do
  /tmp/qstep.sh $b $STEP "$Q" > /tmp/abq.one 2>&1; echo "$b $(tail -1 /tmp/abq.one)" >> /tmp/abq.log.$$
done; done
for b in "$@"; do grep "^$b " /tmp/abq.log.$$ | python3 -c "
import sys, statistics as st
c=[int(l.split()[-2]) for l in sys.stdin]; print('$b cpu med', st.median(c), c)"; done
rm -f /tmp/abq.log.$$
