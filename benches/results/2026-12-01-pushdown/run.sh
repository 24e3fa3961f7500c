#!/usr/bin/env bash
# Query latency before/after pushdown in tessera serve, with VictoriaMetrics, same data, one run.
# Usage: pushdown-bench.sh OLD_BIN NEW_BIN BENCH_BIN OUT
set -u
OLD=$1 NEW=$2 BENCH=$3 OUT=$4
mkdir -p $OUT; W=$(mktemp -d /tmp/pdb.XXXX)
NOW=$(date +%s); END=$(( (NOW-600)/15*15 )); START=$((END-7200)); echo "$START $END" > $OUT/range
$OLD serve --listen 127.0.0.1:19121 --data-dir $W/old > $OUT/old.log 2>&1 & P1=$!
$NEW serve --listen 127.0.0.1:19122 --data-dir $W/new > $OUT/new.log 2>&1 & P2=$!
victoria-metrics -httpListenAddr=127.0.0.1:19123 -storageDataPath=$W/vm -retentionPeriod=100y -search.disableCache -search.maxSamplesPerQuery=10000000000 -search.maxSamplesPerSeries=1000000000 > $OUT/vm.log 2>&1 & P3=$!
sleep 3
for p in 19121 19122 19123; do $BENCH backfill --url http://127.0.0.1:$p/api/v1/write --nodes 100 --interval 15s --start $START --span 2h --seed 1 > $OUT/push-$p.txt 2>&1; grep '^push' $OUT/push-$p.txt; done
curl -s http://127.0.0.1:19123/internal/force_flush >/dev/null
q() { # name port query step
  local t0 t1; t0=$(date +%s%N); curl -s -o $OUT/ans-$1-$2.json --data-urlencode "query=$3" -d start=$START -d end=$END -d step=$4 http://127.0.0.1:$2/api/v1/query_range; t1=$(date +%s%N); echo $(( (t1-t0)/1000000 )); }
declare -A Q=( [dcgm_rate]='sum(rate({__name__=~"DCGM.*"}[5m]))' [util_avg]='avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)' [max_temp]='max by (Hostname) (max_over_time(DCGM_FI_DEV_GPU_TEMP[10m]))' [top5]='topk(5, DCGM_FI_DEV_GPU_TEMP)' [power_model]='sum by (modelName) (DCGM_FI_DEV_POWER_USAGE)' )
for name in dcgm_rate util_avg max_temp top5 power_model; do
  for sys in 19121 19122 19123; do
    ts=""; for r in 1 2 3 4 5; do ts="$ts $(q $name $sys "${Q[$name]}" 15)"; done
    med=$(echo $ts | tr ' ' '\n' | sort -n | sed -n 3p)
    echo "$name $sys ms: $ts  median $med" | tee -a $OUT/times.txt
  done
done
for p in $P1 $P2; do grep VmHWM /proc/$p/status | sed "s/^/$p /"; done | tee $OUT/rss.txt
kill $P1 $P2 $P3; wait 2>/dev/null; rm -rf $W
