#!/bin/bash
# usage: bq.sh BIN QUERYNAME [perf]  -- fresh server on a copy of /tmp/bdata, one billion query twice
set -e
Q=$(grep "^$2:" /work/main/benches/queries/billion.promql | cut -d: -f2-)
rm -rf /tmp/bcopy; cp -a /tmp/bdata /tmp/bcopy
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
$1 serve --listen 127.0.0.1:19994 --data-dir /tmp/bcopy/tessera --config /tmp/bcopy/tessera.toml > /tmp/bcopy.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19994/-/ready >/dev/null && break; sleep 0.5; done
S=1795603860; E=$((S+7*86400))
if [ "$3" = perf ]; then perf record -F ${PF:-499} ${PERFG} -p $pid -o /tmp/bq.perf 2>/dev/null & ppid=$!; sleep 0.5; fi
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
for r in 1 2; do
  c0=$(cpu); t0=$(date +%s%N)
  curl -sf http://127.0.0.1:19994/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 > /tmp/bq.out
  t1=$(date +%s%N); c1=$(cpu); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms; "
done; echo; md5sum < /tmp/bq.out
grep VmHWM /proc/$pid/status
if [ "$3" = perf ]; then kill -INT $ppid; wait $ppid || true; fi
kill $pid; wait $pid || true
