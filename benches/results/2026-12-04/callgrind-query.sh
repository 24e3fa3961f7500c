#!/bin/bash
# usage: cg.sh BIN -- instructions of 2 dcgm_all_rate queries on a copy of /tmp/q100/data (restart state), under callgrind
set -e
rm -rf /tmp/cgcopy; cp -a ${DATA:-/tmp/q100}/data /tmp/cgcopy
rm -f /tmp/cg.out.*
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.out.%p $1 serve --listen 127.0.0.1:19995 --data-dir /tmp/cgcopy > /tmp/cg.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19995/-/ready >/dev/null && break; sleep 0.5; done
read s e < /tmp/q100/range
q='sum(rate({__name__=~"DCGM.*"}[5m]))'
run() { curl -sf http://127.0.0.1:19995/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=15 > /tmp/cg.q.out; }
run
callgrind_control -i on $pid >/dev/null 2>&1
run; run
callgrind_control -i off $pid >/dev/null 2>&1
callgrind_control -d $pid >/dev/null 2>&1
sleep 1
kill $pid; wait $pid || true
f=$(ls -S /tmp/cg.out.* | head -1)
echo "$(basename $1): $(grep -h '^totals' /tmp/cg.out.* | awk '{s+=$2} END {print s/2/1e6}') M instr/query  $(md5sum < /tmp/cg.q.out | cut -c1-8)"
