#!/bin/bash
# usage: bq2.sh BIN DATADIR(with tessera/ and tessera.toml) START QUERYNAME -- page cache dropped, fresh server,
# the query over 7 days at 10m twice: wall, cpu, bytes read from disk
Q=$(grep "^$4:" /work/main/benches/queries/billion.promql | cut -d: -f2-)
sync; echo 3 > /proc/sys/vm/drop_caches
$1 serve --listen 127.0.0.1:19992 --data-dir $2/tessera --config $2/tessera.toml > /tmp/bq2.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19992/-/ready >/dev/null && break; sleep 0.5; done
S=$3; E=$((S+7*86400))
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
rb() { awk '/read_bytes/{print int($2/1e6)}' /proc/$pid/io; }
for r in 1 2; do
  c0=$(cpu); b0=$(rb); t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19992/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 > /tmp/bq2.out
  t1=$(date +%s%N); c1=$(cpu); b1=$(rb); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms read $((b1-b0)) MB; "
done; echo -n "$(md5sum < /tmp/bq2.out | cut -c1-8) "; grep VmHWM /proc/$pid/status | tr -s ' '
kill $pid; wait $pid 2>/dev/null
