#!/bin/bash
# usage: live.sh BIN [perf] -- fresh server, backfill 100 nodes x 2h at 15s (as compare.sh), then
# dcgm_all_rate 8 times at step 15: walls, cpu/query, md5 (perf -> /tmp/live.perf)
set -e
rm -rf /tmp/livedata; mkdir -p /tmp/livedata
$1 serve --listen 127.0.0.1:19997 --data-dir /tmp/livedata > /tmp/live.log 2>&1 &
pid=$!
trap "kill $pid 2>/dev/null" EXIT
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done
END=${END:-1796000000}; START=$((END-7200))
/tmp/benchE backfill --url http://127.0.0.1:19997/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > /tmp/live.push 2>&1
q=${Q:-'sum(rate({__name__=~"DCGM.*"}[5m]))'}
if [ "$2" = perf ]; then perf record -F 499 --call-graph dwarf,16384 -p $pid -o /tmp/live.perf 2>/dev/null & ppid=$!; sleep 0.5; fi
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu)
for r in 1 2 3 4 5 6 7 8; do
  t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$START --data-urlencode end=$END --data-urlencode step=${STEP:-15} > /tmp/live.out
  t1=$(date +%s%N); echo -n "$(( (t1-t0)/1000000 )) "
done; c1=$(cpu); echo "cpu/query $(( (c1-c0)*10/8 )) ms"
md5sum < /tmp/live.out
if [ "$2" = perf ]; then kill -INT $ppid; wait $ppid || true; fi
