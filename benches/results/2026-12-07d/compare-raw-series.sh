#!/bin/bash
# usage: compare-raw-series.sh A_BIN B_BIN -- two tessera servers loaded alike (the compare dataset); every metric's raw samples over the whole span compared series by series (BENCH_BIN: tessera-bench, default next to A_BIN)
set -e
B=${BENCH_BIN:-$(dirname "$1")/tessera-bench}
NOW=$(date +%s); END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - 7200 ))
for x in a b; do rm -rf /tmp/cmp-$x; mkdir -p /tmp/cmp-$x; done
"$1" serve --listen 127.0.0.1:19981 --data-dir /tmp/cmp-a > /tmp/cmp-a.log 2>&1 & pa=$!
"$2" serve --listen 127.0.0.1:19982 --data-dir /tmp/cmp-b > /tmp/cmp-b.log 2>&1 & pb=$!
sleep 3
for p in 19981 19982; do $B backfill --url http://127.0.0.1:$p/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span 2h --concurrency 4 --batch-samples 2000 --protocol 1 > /dev/null 2>&1; done
for m in $(curl -s http://127.0.0.1:19981/api/v1/label/__name__/values | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["data"]))'); do
  for p in 19981 19982; do curl -s http://127.0.0.1:$p/api/v1/query --data-urlencode "query=$m[2h10m]" --data-urlencode time=$END > /tmp/cmp-$p.json; done
  python3 - $m <<'PY'
import json,sys
def load(p):
    r=json.load(open(p))["data"]["result"]; return {tuple(sorted(s["metric"].items())): s["values"] for s in r}
a,b=load("/tmp/cmp-19981.json"),load("/tmp/cmp-19982.json")
bad=[k for k in a if a[k]!=b.get(k)]
print(sys.argv[1], len(a), len(b), "differ:", len(bad))
if bad:
    k=bad[0]; x,y=a[k],b[k]
    for i,(p,q) in enumerate(zip(x,y)):
        if p!=q: print(" first diff at", i, p, q); break
    print(" lens", len(x), len(y))
PY
done
kill $pa $pb
