#!/bin/bash
# usage: reopen.sh BIN REPS -- backfill, query REPS times, restart, query REPS times
set -e
B=${BENCH_BIN:-$(dirname "$1")/tessera-bench}
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 ))
rm -rf /tmp/ro; mkdir -p /tmp/ro
start() { $1 serve --listen 127.0.0.1:19997 --data-dir /tmp/ro $EXTRA > /tmp/ro.log 2>&1 & pid=$!; for i in $(seq 1 300); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done; }
start $1
$B backfill --url http://127.0.0.1:19997/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > /tmp/ro.push 2>&1
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
run() { curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$START --data-urlencode end=$END --data-urlencode step=15 > /tmp/ro.out; }
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
measure() { run; c0=$(cpu); ws=(); for r in $(seq 1 $2); do t0=$(date +%s%N); run; t1=$(date +%s%N); ws+=($(( (t1-t0)/100000 ))); done; c1=$(cpu);
 med=$(printf "%s\n" "${ws[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]/10}'); echo "$1: median ${med} ms cpu/query $(( (c1-c0)*10/$2 )) ms"; }
measure loaded $2
kill $pid; wait $pid || true
start $1
measure reopened $2
kill $pid; wait $pid || true
