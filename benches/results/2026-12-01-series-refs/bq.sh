#!/bin/bash
# usage: bq.sh BIN LABEL DAYS
BIN=$1; L=$2; DAYS=${3:-2}
$BIN/tessera serve --listen 127.0.0.1:19091 --data-dir /tmp/bdata/tessera --config /tmp/bdata/tessera.toml > /tmp/bserve-$L.log 2>&1 &
P=$!
for i in $(seq 120); do curl -fs -o /dev/null 127.0.0.1:19091/-/ready && break; sleep 0.5; done
S=1795525530; E=$((S+DAYS*86400))
cpu(){ awk '{print $14+$15}' /proc/$P/stat; }
while read -r name q; do
  for rep in 1 2; do
    c0=$(cpu); t=$(curl -s -o /tmp/bq-$L-$name.json -w "%{time_total}" 127.0.0.1:19091/api/v1/query_range --data-urlencode "query=$q" -d start=$S -d end=$E -d step=600); c1=$(cpu)
    echo "$L $name rep$rep wall=${t}s cpu=$(( c1-c0 ))cs md5=$(md5sum < /tmp/bq-$L-$name.json | cut -c1-8)"
  done
done <<'Q'
max_temp max by (Hostname) (max_over_time(DCGM_FI_DEV_GPU_TEMP[1h]))
p99_power quantile by (modelName) (0.99, avg_over_time(DCGM_FI_DEV_POWER_USAGE[10m]))
top10_util topk(10, avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))
energy sum by (cluster) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[10m]))
Q
kill $P; wait $P
