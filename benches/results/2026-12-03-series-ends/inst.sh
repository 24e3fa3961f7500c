#!/bin/bash
# usage: inst.sh BIN DATA QUERY [RANGE_SECONDS] -- a fresh server on the billion-sample week's data folder DATA
# (its tessera/ and tessera.toml; loaded by benches/billion.sh --keep-tessera-data with --start 1795674180), the
# query three times at the week's end (instant, or a range query over the last RANGE_SECONDS at a 60 s step):
# wall, server CPU, md5 of the answer, peak RSS.
B=$1; D=$2; Q=$3
$B serve --listen 127.0.0.1:19996 --data-dir "$D/tessera" --config "$D/tessera.toml" > /tmp/inst-server.log 2>&1 & pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19996/-/ready >/dev/null && break; sleep 0.5; done
E=$((1795674180+7*86400))
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
echo -n "[$(basename $B) $(basename $D)] "
for r in 1 2 3; do c0=$(cpu); t0=$(date +%s%N)
  if [ -n "$4" ]; then
    m=$(curl -sf http://127.0.0.1:19996/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$((E-$4)) --data-urlencode end=$E --data-urlencode step=60 | md5sum | cut -c1-8)
  else
    m=$(curl -sf http://127.0.0.1:19996/api/v1/query --data-urlencode "query=$Q" --data-urlencode time=$E | md5sum | cut -c1-8)
  fi
  t1=$(date +%s%N); c1=$(cpu); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms $m; "
done; grep VmHWM /proc/$pid/status | tr -s ' '
kill $pid; wait $pid 2>/dev/null
