#!/bin/bash
# usage: live.sh BIN START -- a fresh server (BIN) on an empty folder, loaded with 6 hours of the GPU fleet
# (2,000 nodes x 8 GPUs x 4 DCGM fields at 30 s, pods churning, from START = unix seconds) by the tessera-bench
# next to it, then, in the same process (its head holds the live series, as a running server's does), each query
# three times at the end of the data: wall, server CPU, md5 of the answer. Then the server's peak RSS.
B=$1; START=$2; END=$((START + 6 * 3600))
D=$(mktemp -d /tmp/ab/live.XXXX)
$B serve --listen 127.0.0.1:19995 --data-dir $D/t > $D/log 2>&1 & pid=$!
for i in $(seq 1 300); do curl -sf http://127.0.0.1:19995/-/ready >/dev/null && break; sleep 0.2; done
"$(dirname $B)/tessera-bench" backfill --url http://127.0.0.1:19995/api/v1/write --nodes 2000 --interval 30s --seed 1 \
  --start $START --span 6h --dcgm-fields GPU_UTIL,GPU_TEMP,POWER_USAGE,TOTAL_ENERGY_CONSUMPTION --node-cpus 0 --no-kube \
  --no-histograms --mean-job-minutes 480 --samples-per-series 120 --batch-samples 50000 --concurrency 2 > $D/load.txt 2>&1
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
q() { # NAME QUERY [RANGE_SECONDS]
  echo -n "[$(basename $(dirname $B))] $1: "
  for r in 1 2 3; do c0=$(cpu); t0=$(date +%s%N)
    if [ -n "$3" ]; then
      m=$(curl -sf http://127.0.0.1:19995/api/v1/query_range --data-urlencode "query=$2" --data-urlencode start=$((END-$3)) --data-urlencode end=$END --data-urlencode step=60 | md5sum | cut -c1-8)
    else
      m=$(curl -sf http://127.0.0.1:19995/api/v1/query --data-urlencode "query=$2" --data-urlencode time=$END | md5sum | cut -c1-8)
    fi
    t1=$(date +%s%N); c1=$(cpu); echo -n "wall $(( (t1-t0)/1000000 )) ms cpu $(( (c1-c0)*10 )) ms $m; "
  done; echo
}
q count_now 'count({__name__=~"DCGM_.*"})'
q max_temp_now 'max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)'
q energy_1h 'sum by (cluster) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5m]))' 3600
q util_6h 'avg by (cluster) (DCGM_FI_DEV_GPU_UTIL)' 21600
echo "[$(basename $(dirname $B))] $(grep -o 'push: .*' $D/load.txt | cut -c1-80) $(grep VmHWM /proc/$pid/status | tr -s ' ')"
kill $pid; wait $pid 2>/dev/null; rm -rf $D
