#!/usr/bin/env bash
# Peak memory and wall time of dashboard range queries, before and after streaming
# evaluation (issue 10, point 3), over N and 10×N samples (10 and 100 GPU nodes, 2 h at
# 15 s). Each size is loaded once into its own data directory (by NEW_BIN); then every
# (binary, size) pair gets a fresh server on that directory, and each query runs 3 times,
# the process's peak RSS reset before each run (`echo 5 > /proc/PID/clear_refs`), so
# VmHWM - VmRSS before the run is what that query added at its peak.
# Usage: run.sh OLD_BIN NEW_BIN BENCH_BIN OUT
set -u
OLD=$1 NEW=$2 BENCH=$3 OUT=$4
PORT=19131
mkdir -p "$OUT"; W=$(mktemp -d /tmp/stb.XXXX)
NOW=$(date +%s); END=$(( (NOW-600)/15*15 )); START=$((END-7200)); echo "$START $END" > "$OUT/range"
ready() { for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/-/ready" >/dev/null && return 0; sleep 0.1; done; return 1; }
kb() { grep "^$2:" "/proc/$1/status" | awk '{print $2}'; }
for nodes in 10 100; do
  "$NEW" serve --listen 127.0.0.1:$PORT --data-dir "$W/d$nodes" > "$OUT/load-$nodes.log" 2>&1 & P=$!
  ready || { echo "server did not start"; exit 1; }
  "$BENCH" backfill --url http://127.0.0.1:$PORT/api/v1/write --nodes $nodes --interval 15s --start $START --span 2h --seed 1 > "$OUT/push-$nodes.txt" 2>&1
  grep -E '^(push|dataset)' "$OUT/push-$nodes.txt"
  kill -TERM $P; wait $P
done
declare -A Q=(
  [dcgm_rate]='sum(rate({__name__=~"DCGM.*"}[5m]))'
  [max_temp]='max by (Hostname) (max_over_time(DCGM_FI_DEV_GPU_TEMP[10m]))'
  [power_model]='sum by (modelName) (DCGM_FI_DEV_POWER_USAGE)'
)
for bin in old new; do
  B=$OLD; [ $bin = new ] && B=$NEW
  for nodes in 10 100; do
    "$B" serve --listen 127.0.0.1:$PORT --data-dir "$W/d$nodes" > "$OUT/serve-$bin-$nodes.log" 2>&1 & P=$!
    ready || { echo "server did not start"; exit 1; }
    sleep 2
    for name in dcgm_rate max_temp power_model; do
      for r in 1 2 3; do
        echo 5 > /proc/$P/clear_refs
        base=$(kb $P VmRSS)
        t0=$(date +%s%N)
        curl -s -o "$OUT/ans-$bin-$nodes-$name.json" --data-urlencode "query=${Q[$name]}" -d start=$START -d end=$END -d step=15 http://127.0.0.1:$PORT/api/v1/query_range
        t1=$(date +%s%N)
        hwm=$(kb $P VmHWM)
        echo "$bin nodes=$nodes $name run=$r ms=$(( (t1-t0)/1000000 )) rss_before_kib=$base peak_kib=$hwm added_mib=$(( (hwm-base)/1024 ))" | tee -a "$OUT/times.txt"
      done
    done
    kill -TERM $P; wait $P
  done
done
for name in dcgm_rate max_temp power_model; do for nodes in 10 100; do
  cmp -s "$OUT/ans-old-$nodes-$name.json" "$OUT/ans-new-$nodes-$name.json" && echo "$name nodes=$nodes: same answer" || echo "$name nodes=$nodes: ANSWERS DIFFER"
done; done | tee "$OUT/answers.txt"
rm -rf "$W"
