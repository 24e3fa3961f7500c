#!/bin/bash
# usage: shq.sh BIN SHARDS: push the 10-node 24 h dataset, then time three dashboard queries (3 reps each)
BIN=$1; SH=$2
D=$(mktemp -d /tmp/ab/q.XXXX)
PORT=$((20000 + RANDOM % 20000))
$BIN/tessera serve --listen 127.0.0.1:$PORT --data-dir $D/t --shards $SH > $D/log 2>&1 &
P=$!
for i in $(seq 100); do curl -fs -o /dev/null 127.0.0.1:$PORT/-/ready && break; sleep 0.1; done
END=$(( ($(date +%s) - 600) / 30 * 30 )); START=$((END-86400))
$BIN/tessera-bench backfill --url http://127.0.0.1:$PORT/api/v1/write --nodes 10 --interval 30s --seed 1 --start $START --span 24h --concurrency 4 --batch-samples 2000 --protocol 1 > $D/push.txt 2>&1
for q in 'sum(rate({__name__=~"DCGM.*"}[5m]))' 'avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)' 'topk(5, max_over_time(DCGM_FI_DEV_GPU_TEMP[10m]))'; do
  ts=""; for rep in 1 2 3; do ts="$ts $(curl -s -o /dev/null -w '%{time_total}' 127.0.0.1:$PORT/api/v1/query_range --data-urlencode "query=$q" -d start=$START -d end=$END -d step=60)"; done
  echo "shards=$SH $q:$ts"
done
kill $P; wait $P; rm -rf $D
