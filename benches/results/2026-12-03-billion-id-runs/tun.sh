#!/bin/bash
# usage: tun.sh TUNABLES -- a fresh server on /tmp/bdata2 (warm page cache) with GLIBC_TUNABLES=$1, the all-samples query twice
B=/work/targets/release/release/tessera
GLIBC_TUNABLES="$1" $B serve --listen 127.0.0.1:19996 --data-dir /tmp/bdata2/tessera --config /tmp/bdata2/tessera.toml > /tmp/r3/tun-server.log 2>&1 & pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19996/-/ready >/dev/null && break; sleep 0.5; done
S=1795674180; E=$((S+7*86400)); Q='sum(count_over_time({__name__=~"DCGM_.*"}[10m]))'
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
echo -n "[${1:-default}] "
for r in 1 2; do c0=$(cpu); t0=$(date +%s%N)
  m=$(curl -sf http://127.0.0.1:19996/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 | md5sum | cut -c1-8)
  t1=$(date +%s%N); c1=$(cpu); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms $m; "
done; grep VmHWM /proc/$pid/status | tr -s ' '
kill $pid; wait $pid 2>/dev/null
