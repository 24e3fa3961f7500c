#!/bin/bash
# usage: ab.sh BIN [QUERY] -- a fresh server on /tmp/bdata2 (the billion-sample week kept by
# 2026-12-03-billion-id-runs, warm page cache), the query (default: the all-samples one) over
# the 7 days at a 10m step twice: wall, server CPU, md5 of the answer, peak RSS. A
# GLIBC_TUNABLES in the environment reaches the server and is printed with the binary.
B=$1; Q=${2:-'sum(count_over_time({__name__=~"DCGM_.*"}[10m]))'}
$B serve --listen 127.0.0.1:19996 --data-dir /tmp/bdata2/tessera --config /tmp/bdata2/tessera.toml > /tmp/ab-server.log 2>&1 & pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19996/-/ready >/dev/null && break; sleep 0.5; done
S=1795674180; E=$((S+7*86400))
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
echo -n "[$(basename $B)${GLIBC_TUNABLES:+ $GLIBC_TUNABLES}] "
for r in 1 2; do c0=$(cpu); t0=$(date +%s%N)
  m=$(curl -sf http://127.0.0.1:19996/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 | md5sum | cut -c1-8)
  t1=$(date +%s%N); c1=$(cpu); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms $m; "
done; grep VmHWM /proc/$pid/status | tr -s ' '
kill $pid; wait $pid 2>/dev/null
