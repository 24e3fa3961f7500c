#!/bin/bash
# usage: qtime.sh BIN QUERY... -- each query 6 times on a fresh server (copy of /tmp/q100/data): wall ms, cpu/query
rm -rf /tmp/q100copy; cp -a /tmp/q100/data /tmp/q100copy
B=$1; shift
$B serve --listen 127.0.0.1:19998 --data-dir /tmp/q100copy > /tmp/q100copy.log 2>&1 &
pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19998/-/ready >/dev/null && break; sleep 0.2; done
read s e < /tmp/q100/range
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
for q in "$@"; do
c0=$(cpu); echo -n "$q: "
for r in 1 2 3 4 5 6; do
  t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19998/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=${STEP:-15} > /tmp/q100copy.out
  t1=$(date +%s%N); echo -n "$(( (t1-t0)/1000000 )) "
done; c1=$(cpu); echo "cpu/query $(( (c1-c0)*10/6 )) ms"
done
kill $pid; wait $pid 2>/dev/null
