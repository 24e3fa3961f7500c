#!/usr/bin/env bash
# benches/results/2026-12-07j/backfill-writes.sh CFG(or none) SPAN : bytes written by the server during a backfill
set -euo pipefail
CFG=$1; SPAN=${2:-24h}; BIN=${BIN_DIR:-target/release}/tessera; BENCH=${BIN_DIR:-target/release}/tessera-bench
W=$(mktemp -d /tmp/wamp.XXXX); PORT=19989
if [ "$CFG" != none ]; then export TESSERA_CONFIG=$CFG; fi
$BIN serve --listen 127.0.0.1:$PORT --data-dir $W/data > $W/log 2>&1 & PID=$!
trap "kill $PID 2>/dev/null; sleep 2; rm -rf $W" EXIT
for i in $(seq 100); do curl -sf http://127.0.0.1:$PORT/-/ready >/dev/null && break; sleep 0.2; done
NOW=$(date +%s); S=$(python3 -c "import re;m=re.match(r'(\d+)([hm])','$SPAN');print(int(m[1])*(3600 if m[2]=='h' else 60))")
END=$(( (NOW - 600) / 15 * 15 )); START=$(( END - S ))
io() { awk '/^write_bytes/ {print $2}' /proc/$PID/io; }
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
w0=$(io); c0=$(cpu); t0=$(date +%s.%N)
$BENCH backfill --url http://127.0.0.1:$PORT/api/v1/write --nodes 100 --interval 15s --seed 1 --start $START --span $SPAN --concurrency 4 --batch-samples 2000 --protocol 1 > $W/push 2>&1
t1=$(date +%s.%N); sleep 20; w1=$(io); c1=$(cpu)
samples=$(grep -o 'samples[^,]*' $W/push | head -3)
echo "cfg=$CFG span=$SPAN push_s=$(python3 -c "print(round($t1-$t0,1))") cpu_s=$(python3 -c "print(round($c1-$c0,1))") written_MB=$(( (w1-w0)/1000000 ))"
grep -i 'samples' $W/push | head -3
du -sm $W/data/*/db | head -4; find $W/data -name '*.sst' | wc -l
