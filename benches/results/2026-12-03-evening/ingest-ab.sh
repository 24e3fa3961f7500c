#!/bin/bash
# usage: ingest-ab.sh BIN REPS [perf]  (EXTRA="--config FILE" passes serve flags, BF_EXTRA backfill flags, e.g. BF_EXTRA="--jitter-ms 0"; QSPAN=S queries the last S seconds only (default all 7200); with perf, PF=HZ sets the sampling rate and PG the call-graph flag, e.g. PG="--call-graph dwarf,16384") -- fresh server, backfill the compare.sh dataset (100 nodes, 2h, 15s),
# then dcgm_all_rate REPS times right away; prints median wall ms and cpu/query
set -e
B=${BENCH_BIN:-/work/targets/release/release/tessera-bench}
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 )); QSTART=$(( END - ${QSPAN:-7200} ))
rm -rf /tmp/abidata; mkdir -p /tmp/abidata
$1 serve --listen 127.0.0.1:19997 --data-dir /tmp/abidata $EXTRA > /tmp/abidata.log 2>&1 &
pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done
$B backfill --url http://127.0.0.1:19997/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 $BF_EXTRA > /tmp/abi.push 2>&1
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
run() { curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$QSTART --data-urlencode end=$END --data-urlencode step=15 > /tmp/abi.out; }
if [ "$3" = perf ]; then perf record -F ${PF:-1999} ${PG:--g} -p $pid -o /tmp/abi.perf 2>/dev/null & ppid=$!; sleep 0.5; fi
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); ws=()
for r in $(seq 1 $2); do t0=$(date +%s%N); run; t1=$(date +%s%N); ws+=($(( (t1-t0)/100000 ))); done
c1=$(cpu)
if [ "$3" = perf ]; then kill -INT $ppid; wait $ppid || true; fi
echo "walls: ${ws[*]}"
med=$(printf "%s\n" "${ws[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]/10}')
echo "median ${med} ms cpu/query $(( (c1-c0)*10/$2 )) ms"
kill $pid; wait $pid || true
