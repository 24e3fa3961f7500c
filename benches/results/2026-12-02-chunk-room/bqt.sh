#!/bin/bash
# first execution of a billion query, per-thread CPU sampled every second
Q=$(grep "^$2:" /work/main/benches/queries/billion.promql | cut -d: -f2-)
rm -rf /tmp/bcopy; cp -a /tmp/bdata /tmp/bcopy; sync; echo 3 > /proc/sys/vm/drop_caches
$1 serve --listen 127.0.0.1:19994 --data-dir /tmp/bcopy/tessera --config /tmp/bcopy/tessera.toml > /tmp/bcopy.log 2>&1 &
pid=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:19994/-/ready >/dev/null && break; sleep 0.5; done
S=1795603860; E=$((S+7*86400))
( curl -sf http://127.0.0.1:19994/api/v1/query_range --data-urlencode "query=$Q" --data-urlencode start=$S --data-urlencode end=$E --data-urlencode step=600 > /tmp/bq.out; echo done > /tmp/bqt.done ) &
rm -f /tmp/bqt.done
prev=""
while [ ! -f /tmp/bqt.done ]; do
  cur=$(for t in /proc/$pid/task/*; do echo "$(basename $t) $(awk '{print $14+$15}' $t/stat) $(cat $t/comm)"; done)
  echo "$cur" > /tmp/bqt.cur
  if [ -n "$prev" ]; then
    echo -n "$(date +%S): "; join <(echo "$prev" | sort) <(echo "$cur" | sort) | awk '{d=$4-$2; if (d>3) printf "%s:%d ", $3, d}'; echo -n " io "; awk '/read_bytes/{print $2/1e6 " MB"}' /proc/$pid/io
  fi
  prev="$cur"; sleep 1
done
kill $pid; wait $pid 2>/dev/null
