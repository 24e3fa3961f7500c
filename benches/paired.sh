#!/usr/bin/env bash
# Paired timing of one range query on two live servers: A and B each get a fresh data
# folder and the same backfill (compare.sh's dataset), then the query runs on A and B
# alternately (ABBA: each goes first every other round), so that the machine's slow and
# fast spells, which move a single compare.sh run by 10-50 % here, fall on both alike.
#
#   benches/paired.sh OLD_BIN NEW_BIN                 # two Tessera binaries
#   benches/paired.sh TESSERA_BIN victoriametrics     # Tessera against VictoriaMetrics
#   benches/paired.sh --rounds 40 --swap A B          # B loaded first (see below)
#   benches/paired.sh --both A B                      # both orders, and their geometric mean
#
# A and B are each a path to a `tessera` binary or the word `victoriametrics` (the
# Debian package's `victoria-metrics`, with -search.disableCache as in compare.sh, and
# /internal/force_flush after its push). Prints, per side, the median and least wall
# time (curl's time_total: connect to last byte) and the median CPU time
# (utime+stime of the server, /proc) per query; then the
# median and quartiles of the per-round ratio B/A, and the ratio of total CPU. The two
# answers are compared point by point (series matched by labels): the largest relative
# difference is printed (two Tessera servers assign series ids in arrival order, so
# sums may differ in the last digit; a real difference shows as more than that).
# Against VictoriaMetrics expect the same series and points but not the same values:
# its `rate` does not extrapolate as Prometheus' does (measured: a median relative
# difference of 0.4 %, and up to 90 % in the range's first five minutes, where the
# dataset's series start inside the windows).
#
# The server loaded second has had less time to settle when the queries start; an A/A
# run of one binary measured that bias at about +5 % for B. --swap loads B first; the
# geometric mean of a run and its swapped run cancels it; --both runs the two and
# prints that mean.
#
# Options: --nodes N (100), --span D (2h: the data loaded), --range D (the query's: the
# last D of the data; default all of it), --interval D (15s), --step S (15), --rounds N
# (30), --query Q (sum(rate({__name__=~"DCGM.*"}[5m]))), --bench PATH (tessera-bench;
# default: next to the first Tessera binary, else target/release), --fleet "ARGS" (more
# `tessera-bench backfill` options for the dataset, e.g. "--mean-job-minutes 10" for
# more pod churn), --restart (each server is stopped after its backfill and started
# again over its data: a Tessera server then reads everything from table files, with
# no head and no memtable). KEEP=1 keeps the work folder (servers' logs, pushes and
# both answers) and prints where it is.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
. "$ROOT/benches/lib.sh"

FLEET=() RESTART=0
NODES=100 SPAN=2h RANGE="" INTERVAL=15s STEP=15 ROUNDS=30 SWAP=0 BOTH=0 BENCH=""
QUERY='sum(rate({__name__=~"DCGM.*"}[5m]))'
args=() once=()
for x in "$@"; do [ "$x" = --both ] || once+=("$x"); done
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES="$2"; shift 2 ;;
        --span) SPAN="$2"; shift 2 ;;
        --range) RANGE="$2"; shift 2 ;;
        --interval) INTERVAL="$2"; shift 2 ;;
        --step) STEP="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --query) QUERY="$2"; shift 2 ;;
        --bench) BENCH="$2"; shift 2 ;;
        --fleet) read -r -a FLEET <<< "$2"; shift 2 ;;
        --swap) SWAP=1; shift ;;
        --both) BOTH=1; shift ;;
        --restart) RESTART=1; shift ;;
        -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
[ ${#args[@]} -eq 2 ] || { echo "usage: benches/paired.sh [options] A B (each a tessera binary or victoriametrics)" >&2; exit 2; }
A="${args[0]}" B="${args[1]}"
if [ "$BOTH" = 1 ]; then
    # Both orders, then the geometric means that cancel the order's bias.
    [ "$SWAP" = 0 ] || { echo "--both runs --swap itself; give one of them" >&2; exit 2; }
    out1=$(bash "$0" "${once[@]}") || exit $?
    echo "$out1"
    out2=$(bash "$0" --swap "${once[@]}") || exit $?
    echo "$out2"
    python3 - "$out1" "$out2" <<'PY'
import math, re, sys
def ratios(text):
    m = re.search(r"B/A per round: median ([0-9.]+) .*total CPU B/A ([0-9.]+)", text)
    if not m:
        sys.exit("no B/A line in a run's output")
    return float(m.group(1)), float(m.group(2))
(w1, c1), (w2, c2) = ratios(sys.argv[1]), ratios(sys.argv[2])
print(f"both orders: B/A wall {math.sqrt(w1 * w2):.3f} (geometric mean of {w1:.3f} and {w2:.3f}), "
      f"CPU {math.sqrt(c1 * c2):.3f}")
PY
    exit 0
fi
for s in "$A" "$B"; do
    if [ "$s" = victoriametrics ]; then
        command -v victoria-metrics >/dev/null || { echo "victoria-metrics not installed (apt-get install victoria-metrics)" >&2; exit 2; }
    elif [ ! -x "$s" ]; then
        echo "not an executable tessera binary: $s" >&2; exit 2
    fi
done
if [ -z "$BENCH" ]; then
    for s in "$A" "$B"; do
        if [ "$s" != victoriametrics ] && [ -x "$(dirname "$s")/tessera-bench" ]; then BENCH="$(dirname "$s")/tessera-bench"; break; fi
    done
    BENCH="${BENCH:-${CARGO_TARGET_DIR:-$ROOT/target}/release/tessera-bench}"
fi
[ -x "$BENCH" ] || { echo "no tessera-bench at $BENCH (cargo build --release --workspace, or --bench PATH)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/paired.XXXXXX)
declare -A PID PORT
cleanup() { for x in a b; do [ -n "${PID[$x]:-}" ] && stop_process "${PID[$x]}" 10; done; if [ -n "${KEEP:-}" ]; then echo "kept: $WORK" >&2; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

span_s=$(to_seconds "$SPAN"); step_s=$(to_seconds "$STEP")
NOW=$(date +%s); END=$(( (NOW - 600) / step_s * step_s )); START=$(( END - span_s ))
# The query's range: the last RANGE of the data (all of it by default).
QSTART=$(( END - $(to_seconds "${RANGE:-$SPAN}") ))

launch() { # $1 = a|b, $2 = system: starts it on PORT[$1] over its data folder
    local x="$1" sys="$2" port="${PORT[$1]}" ready
    if [ "$sys" = victoriametrics ]; then
        victoria-metrics -httpListenAddr="127.0.0.1:$port" -storageDataPath="$WORK/$x/vm" \
            -retentionPeriod=100y -search.disableCache >> "$WORK/$x.log" 2>&1 &
        PID[$x]=$!; ready="http://127.0.0.1:$port/health"
    else
        "$sys" serve --listen "127.0.0.1:$port" --data-dir "$WORK/$x/data" >> "$WORK/$x.log" 2>&1 &
        PID[$x]=$!; ready="http://127.0.0.1:$port/-/ready"
    fi
    wait_ready "$ready" "${PID[$x]}" 120 || { echo "$sys did not become ready; log: $WORK/$x.log" >&2; exit 1; }
}
start() { # $1 = a|b, $2 = system
    local x="$1" sys="$2" port; port=$(free_port); PORT[$x]=$port
    mkdir -p "$WORK/$x"
    launch "$x" "$sys"
    "$BENCH" backfill --url "http://127.0.0.1:$port/api/v1/write" --nodes "$NODES" --interval "$INTERVAL" \
        --seed 1 --start "$START" --span "$SPAN" --concurrency 4 --batch-samples 2000 --protocol 1 "${FLEET[@]}" \
        > "$WORK/$x.push" 2>&1
    if [ "$sys" = victoriametrics ]; then curl -fsS "http://127.0.0.1:$port/internal/force_flush" >/dev/null; fi
    if [ "$RESTART" = 1 ]; then
        # Stopped (a Tessera server flushes its head and memtables to table files on
        # SIGTERM) and started again over the same folder: the state after a restart.
        stop_process "${PID[$x]}" 120 "$x"
        launch "$x" "$sys" 2>>"$WORK/$x.log"
    fi
}
if [ "$SWAP" = 1 ]; then start b "$B"; start a "$A"; else start a "$A"; start b "$B"; fi
sleep 5

# Prints the request's wall time in microseconds as curl measured it (connect to last
# byte): timed around the process from the shell, each query also carried curl's own
# start, about 10 ms here on both sides, which made the faster side's share look larger.
run() {
    curl -sf -o "$WORK/$1.out" -w '%{time_total}' "http://127.0.0.1:${PORT[$1]}/api/v1/query_range" \
        --data-urlencode "query=$QUERY" --data-urlencode start="$QSTART" --data-urlencode end="$END" \
        --data-urlencode step="$step_s" | awk '{ printf "%d", $1 * 1e6 }'
}
run a >/dev/null; run b >/dev/null # one untimed query each
declare -A res
for r in $(seq 1 "$ROUNDS"); do
    order="a b"; [ $((r % 2)) = 0 ] && order="b a"
    for x in $order; do
        c0=$(cpu_seconds "${PID[$x]}"); us=$(run "$x"); c1=$(cpu_seconds "${PID[$x]}")
        res[$x]="$us $c0 $c1"
    done
    echo "${res[a]} ${res[b]}"
done > "$WORK/rows"

echo "query: $QUERY over ${RANGE:-$SPAN} at ${step_s}s (data: $SPAN); $NODES nodes every $INTERVAL; $ROUNDS rounds, ABBA$([ "$SWAP" = 1 ] && echo ', B loaded first')"
python3 - "$A" "$B" "$WORK/rows" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[3])]
wa = [r[0] / 1000 for r in rows]; ca = [(r[2] - r[1]) * 1000 for r in rows]
wb = [r[3] / 1000 for r in rows]; cb = [(r[5] - r[4]) * 1000 for r in rows]
ratio = [b / a for a, b in zip(wa, wb)]
q = st.quantiles(ratio, n=4)
for name, w, c in (("A", wa, ca), ("B", wb, cb)):
    who = sys.argv[1] if name == "A" else sys.argv[2]
    print(f"{name} {who}: wall median {st.median(w):.1f} ms (least {min(w):.1f}), CPU median {st.median(c):.0f} ms per query")
print(f"B/A per round: median {st.median(ratio):.3f} (quartiles {q[0]:.3f}..{q[2]:.3f}); total CPU B/A {sum(cb) / max(sum(ca), 1e-9):.3f}")
PY
python3 - "$WORK/a.out" "$WORK/b.out" <<'PY'
import json, sys
def series(path):
    r = json.load(open(path))["data"]["result"]
    return {tuple(sorted(s["metric"].items())): {t: float(v) for t, v in s["values"]} for s in r}
a, b = series(sys.argv[1]), series(sys.argv[2])
points = worst = 0.0
missing = len(set(a) ^ set(b))
for k in set(a) & set(b):
    for t in set(a[k]) | set(b[k]):
        x, y = a[k].get(t), b[k].get(t)
        if x is None or y is None:
            missing += 1
            continue
        points += 1
        if x != y and not (x != x and y != y):  # NaN in both is the same answer
            worst = max(worst, abs(x - y) / max(abs(x), abs(y)))
print(f"answers: {len(a)} and {len(b)} series, {points:.0f} points in both, {missing} series or points in one only, "
      f"largest relative difference {worst:.2g}")
PY
