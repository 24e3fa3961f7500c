#!/bin/bash
# usage: liveab.sh ROUNDS BIN... -- per round and binary: fresh server, backfill (as live.sh), then each
# query of /tmp/liveq.txt (name<TAB>query) 8x at step 15: median wall, cpu/query, md5
R=$1; shift
END=1796000000; START=$((END-7200))
for r in $(seq 1 $R); do for b in "$@"; do
  rm -rf /tmp/livedata; mkdir -p /tmp/livedata
  $b serve --listen 127.0.0.1:19997 --data-dir /tmp/livedata > /tmp/live.log 2>&1 &
  pid=$!
  for i in $(seq 1 300); do curl -sf http://127.0.0.1:19997/-/ready >/dev/null && break; sleep 0.2; done
  /tmp/benchE backfill --url http://127.0.0.1:19997/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > /tmp/live.push 2>&1
  while IFS=$'\t' read -r name q; do
    c0=$(awk '{print $14+$15}' /proc/$pid/stat); ws=""
    for k in 1 2 3 4 5 6 7 8; do
      t0=$(date +%s%N)
      curl -sf http://127.0.0.1:19997/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$START --data-urlencode end=$END --data-urlencode step=15 > /tmp/liveab.out
      t1=$(date +%s%N); ws="$ws $(( (t1-t0)/1000000 ))"
    done
    c1=$(awk '{print $14+$15}' /proc/$pid/stat)
    med=$(echo $ws | tr ' ' '\n' | sort -n | sed -n 4p)
    echo "$b $name wall_med $med cpu/q $(( (c1-c0)*10/8 )) md5 $(md5sum < /tmp/liveab.out | cut -c1-8)"
  done < /tmp/liveq.txt
  kill $pid; wait $pid 2>/dev/null
done; done
