#!/bin/bash
# instructions (callgrind) of a restarted server answering dcgm_all_rate twice
rm -rf /tmp/cgcopy; cp -a /tmp/q100/data /tmp/cgcopy
valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$2.out $1 serve --listen 127.0.0.1:19995 --data-dir /tmp/cgcopy > /tmp/cg.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19995/-/ready >/dev/null && break; sleep 0.5; done
read s e < /tmp/q100/range
q=${Q:-'sum(rate({__name__=~"DCGM.*"}[5m]))'}
for r in $(seq 1 ${N:-2}); do curl -sf http://127.0.0.1:19995/api/v1/query_range --data-urlencode "query=$q" --data-urlencode start=$s --data-urlencode end=$e --data-urlencode step=15 | md5sum; done
kill $pid; wait $pid 2>/dev/null
grep -h "^summary\|^totals" /tmp/cg.$2.out* | head -3
