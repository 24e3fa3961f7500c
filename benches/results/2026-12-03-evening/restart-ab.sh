#!/bin/bash
# usage: [DATA=DIR] restart-ab.sh BIN REPS -- dcgm_all_rate on a copy of DIR/data (default /tmp/q100), range from DIR/range; prints median wall ms, cpu/query
set -e
rm -rf /tmp/q100copy; cp -a ${DATA:-/tmp/q100}/data /tmp/q100copy
$1 serve --listen 127.0.0.1:19998 --data-dir /tmp/q100copy > /tmp/q100copy.log 2>&1 &
pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19998/-/ready >/dev/null && break; sleep 0.2; done
read s e < ${DATA:-/tmp/q100}/range
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
run() { curl -sf http://127.0.0.1:19998/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=15 > /tmp/q100copy.out; }
run; run
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); ws=()
for r in $(seq 1 $2); do t0=$(date +%s%N); run; t1=$(date +%s%N); ws+=($(( (t1-t0)/100000 ))); done
c1=$(cpu)
med=$(printf "%s\n" "${ws[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]/10}')
echo "median ${med} ms cpu/query $(( (c1-c0)*10/$2 )) ms $(md5sum < /tmp/q100copy.out | cut -c1-8)"
kill $pid; wait $pid || true
