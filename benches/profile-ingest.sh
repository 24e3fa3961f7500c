#!/usr/bin/env bash
# CPU profile of `tessera serve`'s remote-write path under the side-by-side benchmark's
# load: a fresh server on loopback with a throwaway data folder, `perf record` attached
# to it for exactly the push, the same `tessera-bench backfill` flags as
# benches/compare.sh's defaults. Writes perf.data, a folded self/children report and
# the push summary and the server's CPU seconds over the push to --out.
#
#   benches/profile-ingest.sh --out /tmp/prof             # release binaries of $CARGO_TARGET_DIR
#   TESSERA_BIN=… BENCH_BIN=… benches/profile-ingest.sh --out /tmp/prof --span 6h
#
# Call graphs come from DWARF unwinding (the release profile keeps line tables; the
# build has no frame pointers), sampled at --freq Hz with 16 KiB of stack per sample.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
source "$ROOT/benches/lib.sh"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TESSERA_BIN="${TESSERA_BIN:-$TARGET_DIR/release/tessera}"
BENCH_BIN="${BENCH_BIN:-$TARGET_DIR/release/tessera-bench}"
OUT=""
NODES=10
SPAN=24h
INTERVAL=30s
FREQ=199
EXTRA=()

while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="$2"; shift 2 ;;
        --nodes) NODES="$2"; shift 2 ;;
        --span) SPAN="$2"; shift 2 ;;
        --freq) FREQ="$2"; shift 2 ;;
        --bench-arg=*) EXTRA+=("${1#--bench-arg=}"); shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$OUT" ] || { echo "--out DIR is required" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$OUT"
DATA="$(mktemp -d /tmp/tessera-profile.XXXXXX)"
SERVER_PID=""
cleanup() {
    [ -z "$SERVER_PID" ] || stop_process "$SERVER_PID" 30 profile-ingest
    rm -rf "$DATA"
}
trap cleanup EXIT

PORT=$(free_port)
"$TESSERA_BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA/tessera" > "$OUT/server.log" 2>&1 &
SERVER_PID=$!
wait_ready "http://127.0.0.1:$PORT/-/ready" "$SERVER_PID" 60 ||
    { echo "tessera did not become ready; log: $OUT/server.log" >&2; exit 1; }

# Same dataset as compare.sh: the span ending 10 minutes ago, aligned to the interval.
END=$(( ($(date +%s) - 600) / $(to_seconds "$INTERVAL") * $(to_seconds "$INTERVAL") ))
START=$(( END - $(to_seconds "$SPAN") ))

# The generator encodes the whole dataset before it starts sending; attach perf once the
# first request arrives so the profile covers the push only.
"$BENCH_BIN" backfill --url "http://127.0.0.1:$PORT/api/v1/write" --nodes "$NODES" --interval "$INTERVAL" \
    --seed 1 --start "$START" --span "$SPAN" --concurrency 4 --batch-samples 2000 --protocol 1 "${EXTRA[@]}" \
    --json "$OUT/push.json" > "$OUT/push.txt" 2>&1 &
BENCH_PID=$!
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null | awk '/^tessera_samples_received_total/ {print $2}'; }
while kill -0 "$BENCH_PID" 2>/dev/null; do
    v=$(metric || true)
    [ -n "$v" ] && [ "${v%%.*}" != 0 ] && break
    sleep 0.05
done
CPU0=$(cpu_seconds "$SERVER_PID")
perf record -F "$FREQ" -g --call-graph dwarf,16384 -p "$SERVER_PID" -o "$OUT/perf.data" 2> "$OUT/perf-record.log" &
PERF_PID=$!
wait "$BENCH_PID" || true
CPU1=$(cpu_seconds "$SERVER_PID")
kill -INT "$PERF_PID"
wait "$PERF_PID" || true
cat "$OUT/push.txt"
# Server CPU over the push (perf's own sampling overhead included).
echo "server CPU during the push: $(awk -v a="$CPU0" -v b="$CPU1" 'BEGIN { printf "%.1f", b - a }') s" | tee "$OUT/cpu.txt"
perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio --percent-limit 0.5 -g none \
    > "$OUT/self.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --children --sort symbol --stdio --percent-limit 2 -g none \
    > "$OUT/children.txt" 2>/dev/null
echo "profile in $OUT (self.txt, children.txt, perf.data)"
