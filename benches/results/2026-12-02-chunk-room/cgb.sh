#!/bin/bash
# instructions (callgrind) of a server on a copy of the billion folder answering one query over DAYS days
Q=$(grep "^${QN:-energy_rate_by_cluster}:" /work/main/benches/queries/billion.promql | cut -d: -f2-)
rm -rf /tmp/cgbcopy; cp -a /tmp/bdata /tmp/cgbcopy
valgrind --tool=callgrind --callgrind-out-file=/tmp/cgb.$2.out $1 serve --listen 127.0.0.1:19993 --data-dir /tmp/cgbcopy/tessera --config /tmp/cgbcopy/tessera.toml > /tmp/cgb.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19993/-/ready >/dev/null && break; sleep 0.5; done
S=1795603860; E=$((S+${DAYS:-1}*86400))
for r in $(seq 1 ${N:-1}); do curl -sf http://127.0.0.1:19993/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 | md5sum; done
kill $pid; wait $pid 2>/dev/null
grep -h "^summary\|^totals" /tmp/cgb.$2.out* | head -3
