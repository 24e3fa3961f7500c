#!/bin/bash
# usage: bqio.sh BIN QUERY DAYS -- one rep, wall, cpu, bytes read by syscalls
set -e
rm -rf /tmp/bcopy; mkdir -p /tmp/bcopy
(cd /tmp/bdata && find . -type d -exec mkdir -p /tmp/bcopy/{} \; && find . -type f -name '*.sst' -exec ln {} /tmp/bcopy/{} \; && find . -type f ! -name '*.sst' -exec cp {} /tmp/bcopy/{} \;)
$1 serve --config /tmp/bcopy/tessera.toml --listen 127.0.0.1:19997 --data-dir /tmp/bcopy/tessera > /tmp/bcopy.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done
s=1795525530; e=$((s + 86400*$3))
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
r0=$(awk '/rchar/{print $2}' /proc/$pid/io); c0=$(cpu)
t0=$(date +%s%N)
curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$2" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=600 > /tmp/bq.out
t1=$(date +%s%N); c1=$(cpu); r1=$(awk '/rchar/{print $2}' /proc/$pid/io)
echo "$(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms read $(( (r1-r0)/1048576 )) MiB"
md5sum < /tmp/bq.out
kill $pid; wait $pid || true
