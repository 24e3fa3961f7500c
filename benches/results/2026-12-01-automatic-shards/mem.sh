#!/bin/bash
# Head memory per active series after a 2,000-node push (tessera_head_bytes and the write path's
# remembered-series maps from /metrics, RSS from /proc).
BIN=$1
D=$(mktemp -d /tmp/ab/m.XXXX)
$BIN/tessera serve --listen 127.0.0.1:19095 --data-dir $D/t > $D/log 2>&1 &
P=$!
for i in $(seq 100); do curl -fs -o /dev/null 127.0.0.1:19095/-/ready && break; sleep 0.1; done
END=$(( ($(date +%s) - 600) / 30 * 30 )); START=$((END-600))
$BIN/tessera-bench backfill --url http://127.0.0.1:19095/api/v1/write --nodes 2000 --interval 30s --seed 1 --start $START --span 10m --concurrency 4 --batch-samples 2000 --protocol 1 > $D/push.txt 2>&1
tail -4 $D/push.txt
curl -s 127.0.0.1:19095/metrics > $D/metrics.txt
for m in tessera_head_bytes tessera_head_series tessera_active_series tessera_write_series_remembered tessera_write_series_remembered_bytes; do
  echo "$m $(awk -v m=$m '$1 ~ "^"m"({|$)" {s+=$2} END {printf "%d", s}' $D/metrics.txt)"
done
grep -E 'VmRSS|VmHWM' /proc/$P/status
kill $P; wait $P
rm -rf $D
