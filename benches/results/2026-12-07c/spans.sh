#!/bin/bash
# usage: spans.sh BIN -- one server, the compare dataset; dcgm_all_rate over the last 2h, 1h, 30m, 15m of it (same end), 15 runs each, curl time_total medians, plus the series and samples each reads
set -e
BIN=$1
B=${BENCH_BIN:-$(dirname "$1")/tessera-bench}
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 ))
rm -rf /tmp/fx; mkdir -p /tmp/fx
$BIN serve --listen 127.0.0.1:19995 --data-dir /tmp/fx > /tmp/fx.log 2>&1 & pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19995/-/ready >/dev/null && break; sleep 0.2; done
$B backfill --url http://127.0.0.1:19995/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > /tmp/fx.push 2>&1
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
for span in 7200 3600 1800 900; do
  s=$(( END - span )); ws=()
  for r in $(seq 1 15); do
    t=$(curl -s -o /dev/null -w '%{time_total}' http://127.0.0.1:19995/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$END --data-urlencode step=15)
    ws+=($t)
  done
  n=$(curl -s http://127.0.0.1:19995/api/v1/query --data-urlencode "query=count(count_over_time({__name__=~\"DCGM.*\"}[$((span + 300))s]))" --data-urlencode time=$END | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
  m=$(curl -s http://127.0.0.1:19995/api/v1/query --data-urlencode "query=sum(count_over_time({__name__=~\"DCGM.*\"}[$((span + 300))s]))" --data-urlencode time=$END | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
  echo "span ${span}s: median $(printf '%s\n' "${ws[@]}" | sort -n | sed -n 8p) s; series $n, samples $m"
done
kill $pid; wait $pid || true
