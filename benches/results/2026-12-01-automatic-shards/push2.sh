#!/bin/bash
# usage: push.sh BIN SHARDS LABEL
BIN=$1; SH=$2; L=$3
D=$(mktemp -d /tmp/ab/d.XXXX)
PORT=$((20000 + RANDOM % 20000))
$BIN/tessera serve --listen 127.0.0.1:$PORT --data-dir $D/t --shards $SH > $D/log 2>&1 &
P=$!
for i in $(seq 100); do curl -fs -o /dev/null 127.0.0.1:$PORT/-/ready && break; sleep 0.1; done
END=$(( ($(date +%s) - 600) / 30 * 30 )); START=$((END-86400))
c0=$(awk '{print $14+$15}' /proc/$P/stat)
$BIN/tessera-bench backfill --url http://127.0.0.1:$PORT/api/v1/write --nodes 10 --interval 30s --seed 1 --start $START --span 24h --concurrency ${CONC:-4} --batch-samples ${BATCH:-2000} --protocol 1 > $D/push.txt 2>&1
c1=$(awk '{print $14+$15}' /proc/$P/stat)
rss=$(awk '/VmHWM/{print $2}' /proc/$P/status)
rate=$(grep -o '= [0-9]* samples/s' $D/push.txt)
p99=$(grep -o 'p99 [0-9.]*' $D/push.txt)
kill $P; wait $P
echo "$L shards=$SH cpu_s=$(( (c1-c0) ))e-2 per9.5M  $rate $p99 hwm_kb=$rss"
rm -rf $D
