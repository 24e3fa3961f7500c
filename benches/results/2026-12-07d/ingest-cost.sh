#!/bin/bash
# usage: ingest-cost.sh BIN -- server CPU seconds for the compare backfill and head bytes after it
B=${BENCH_BIN:-$(dirname "$1")/tessera-bench}
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 ))
rm -rf /tmp/ic; mkdir -p /tmp/ic
$1 serve --listen 127.0.0.1:19971 --data-dir /tmp/ic > /tmp/ic.log 2>&1 & pid=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:19971/-/ready >/dev/null && break; sleep 0.1; done
c0=$(awk '{print $14+$15}' /proc/$pid/stat)
$B backfill --url http://127.0.0.1:19971/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 2>&1 | grep push: | sed 's/;.*//'
c1=$(awk '{print $14+$15}' /proc/$pid/stat)
hb=$(curl -s http://127.0.0.1:19971/metrics | awk '/^tessera_head_bytes/ {s+=$2} END {print s}')
echo "$1: server CPU $(( (c1-c0) )) ticks, head bytes $hb"
kill $pid; wait $pid 2>/dev/null
