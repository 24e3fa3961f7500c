#!/usr/bin/env bash
PORT=19987; PIDS=()
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 ))
i=0; for B in "$@"; do W=$(mktemp -d /tmp/e.XXXX); $B serve --listen 127.0.0.1:$((PORT+i)) --data-dir $W/data > $W/log 2>&1 & PIDS+=($!); sleep 2
  /work/bins/h027/tessera-bench backfill --url http://127.0.0.1:$((PORT+i))/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > $W/push 2>&1; i=$((i+1)); done
sleep 3
for r in 1 2 3; do i=0; for B in "$@"; do P=$((PORT+i));
  for Q in 'vector(1)' 'sum(rate(nonexistent_metric[5m]))' "${QQ:-sum(rate(DCGM_FI_DEV_GPU_TEMP[5m]))}"; do for k in $(seq 31); do curl -sf -o /dev/null -w '%{time_total}\n' http://127.0.0.1:$P/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$START --data-urlencode end=$END --data-urlencode step=15; done | sort -n | awk -v q="$Q" -v b="$B" '{a[NR]=$1} END {printf "%s %.3f ms %s\n", b, a[int((NR+1)/2)]*1000, q}'; done; i=$((i+1)); done; done
for p in "${PIDS[@]}"; do kill $p; done; sleep 1; rm -rf /tmp/e.*
