#!/bin/bash
# usage: bq2.sh BIN QUERY DAYS REPS -- like bq.sh, prints wall and server CPU per rep
set -e
rm -rf /tmp/bcopy; mkdir -p /tmp/bcopy
(cd /tmp/bdata && find . -type d -exec mkdir -p /tmp/bcopy/{} \; && find . -type f -name '*.sst' -exec ln {} /tmp/bcopy/{} \; && find . -type f ! -name '*.sst' -exec cp {} /tmp/bcopy/{} \;)
$1 serve --config /tmp/bcopy/tessera.toml --listen 127.0.0.1:19997 --data-dir /tmp/bcopy/tessera > /tmp/bcopy.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done
s=1795525530; e=$((s + 86400*$3))
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
for r in $(seq 1 $4); do
  c0=$(cpu); t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$2" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=600 > /tmp/bq.out
  t1=$(date +%s%N); c1=$(cpu); echo -n "$(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms; "
done
grep VmHWM /proc/$pid/status
md5sum < /tmp/bq.out
kill $pid; wait $pid || true
