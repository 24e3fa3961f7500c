#!/bin/bash
# usage: b7.sh OLD NEW ROUNDS -- the five billion queries over 7 days, one per fresh server, binaries alternating
qs=(
'sum by (cluster) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[10m]))'
'max by (Hostname) (max_over_time(DCGM_FI_DEV_GPU_TEMP[1h]))'
'quantile by (modelName) (0.99, avg_over_time(DCGM_FI_DEV_POWER_USAGE[10m]))'
'topk(10, avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))'
'sum(count_over_time({__name__=~"DCGM_.*"}[10m]))'
)
for r in $(seq 1 $3); do
  for q in "${qs[@]}"; do
    echo "## $q"
    for b in $1 $2; do
      echo "$(basename $b): $(bash /tmp/bq2.sh $b "$q" 7 1 2>&1 | tr '\n' ' ')"
    done
  done
done
