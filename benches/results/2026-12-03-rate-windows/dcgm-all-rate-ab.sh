#!/bin/bash
# usage: q100.sh BIN [perf]  -- dcgm_all_rate on a copy of /tmp/q100/data, 5 reps, prints ms
set -e
rm -rf /tmp/q100copy; cp -a /tmp/q100/data /tmp/q100copy
$1 serve --listen 127.0.0.1:19998 --data-dir /tmp/q100copy > /tmp/q100copy.log 2>&1 &
pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19998/-/ready >/dev/null && break; sleep 0.2; done
read s e < /tmp/q100/range
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
if [ "$2" = perf ]; then perf record -F 999 -g -p $pid -o /tmp/q100.perf 2>/dev/null & ppid=$!; sleep 0.5; fi
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu)
for r in 1 2 3 4 5 6 7 8; do
  t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19998/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=15 > /tmp/q100copy.out
  t1=$(date +%s%N); echo -n "$(( (t1-t0)/1000000 )) "
done; c1=$(cpu); echo "cpu/query $(( (c1-c0)*10/8 )) ms"
md5sum < /tmp/q100copy.out
if [ "$2" = perf ]; then kill -INT $ppid; wait $ppid || true; fi
kill $pid; wait $pid || true
