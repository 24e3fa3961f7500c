#!/usr/bin/env bash
# The billion-sample benchmark: Tessera and VictoriaMetrics loaded with the same
# GPU-fleet dataset of over 10^9 samples, then dashboard range queries over all of it,
# side by side in one run.
#
#   benches/billion.sh --no-build                 # 16,000 GPUs x 4 DCGM fields x 7 days at 30 s
#   benches/billion.sh --nodes 50 --span 6h       # the same steps on a small dataset
#   benches/billion.sh --help
#
# For each system: a fresh server on loopback, a bulk load with tessera-bench backfill
# (generated while sending, `--samples-per-series`: an hour of each series per
# request; the same flags, seed and start for both systems = identical samples), the
# system's flush step, then for every query in the query file: restart the server
# (so each query runs uncached in a fresh process and the process' peak RSS is that
# query's), run the query --reps times as a range query over the whole dataset, read
# VmHWM. Finally the samples each query's selectors cover are counted on the system
# itself (`count_over_time` over the whole range), to give samples scanned per second.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
. "$ROOT/benches/lib.sh"

NODES=2000
SPAN=7d
INTERVAL=30s
STEP=10m
REPS=2
FIELDS=GPU_UTIL,GPU_TEMP,POWER_USAGE,TOTAL_ENERGY_CONSUMPTION
JOB_MINUTES=480
PER_SERIES=120
BATCH=50000
SYSTEMS="tessera,victoriametrics"
QUERIES="$ROOT/benches/queries/billion.promql"
OUT=""
BUILD=1
START_ARG=""
REUSE=""
KEEP=""

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF

Options (defaults in brackets):
  --nodes N              GPU nodes, 8 GPUs each [$NODES]
  --span D               simulated time span [$SPAN]
  --interval D           scrape interval [$INTERVAL]
  --dcgm-fields LIST     DCGM fields per GPU [$FIELDS]
  --mean-job-minutes M   pod churn (see tessera-bench backfill --help) [$JOB_MINUTES]
  --step D               range-query step [$STEP]
  --reps N               executions of each query per fresh process [$REPS]
  --queries FILE         query file, \`name: expression\` per line [benches/queries/billion.promql]
  --systems LIST         tessera,victoriametrics or one of them [$SYSTEMS]
  --start UNIX           first timestamp, seconds (default: the span ending 10 minutes ago);
                         pass the one of an earlier run to query its data again
  --reuse-tessera-data DIR  query a Tessera data folder loaded by an earlier run (with
                         the same dataset flags and --start) instead of loading; the
                         folder is not modified (its SST files are hard-linked, the
                         rest copied)
  --keep-tessera-data DIR  after the run, move the Tessera data folder it loaded to DIR
                         (must not exist) for later --reuse-tessera-data runs
  --out DIR              results folder [a new folder under /tmp]
  --no-build             use existing release binaries (TESSERA_BIN, BENCH_BIN or target/release)
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES="$2"; shift 2 ;;
        --span) SPAN="$2"; shift 2 ;;
        --interval) INTERVAL="$2"; shift 2 ;;
        --dcgm-fields) FIELDS="$2"; shift 2 ;;
        --mean-job-minutes) JOB_MINUTES="$2"; shift 2 ;;
        --step) STEP="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --queries) QUERIES="$2"; shift 2 ;;
        --systems) SYSTEMS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --start) START_ARG="$2"; shift 2 ;;
        --reuse-tessera-data) REUSE="$2"; shift 2 ;;
        --keep-tessera-data) KEEP="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "billion.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[billion %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ -z "$KEEP" ] || [ ! -e "$KEEP" ] || die "--keep-tessera-data: $KEEP exists already"
SPAN_S=$(to_seconds "$SPAN")
INTERVAL_S=$(to_seconds "$INTERVAL")
command -v jq >/dev/null || die "needs jq (apt-get install jq)"
case ",$SYSTEMS," in
    *,victoriametrics,*)
        if ! command -v victoria-metrics >/dev/null; then
            log "installing victoria-metrics (Debian package)"
            SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
            $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null \
                || die "could not install victoria-metrics"
            if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
                $SUDO systemctl disable --now victoria-metrics 2>/dev/null || true
            fi
        fi ;;
esac

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "$BUILD" = 1 ]; then
    log "building release binaries (cargo build --release --workspace)"
    (cd "$ROOT" && cargo build --release --workspace >&2)
fi
TESSERA_BIN="${TESSERA_BIN:-$TARGET_DIR/release/tessera}"
BENCH_BIN="${BENCH_BIN:-$TARGET_DIR/release/tessera-bench}"
[ -x "$BENCH_BIN" ] || die "no tessera-bench binary at $BENCH_BIN"
[ -x "$TESSERA_BIN" ] || die "no tessera binary at $TESSERA_BIN"
WORK="$(mktemp -d /tmp/tessera-billion.XXXXXX)"
cp "$BENCH_BIN" "$WORK/tessera-bench"; BENCH_BIN="$WORK/tessera-bench"
TESSERA_GIVEN="$TESSERA_BIN"
cp "$TESSERA_BIN" "$WORK/tessera"; TESSERA_BIN="$WORK/tessera"
OUT="${OUT:-$WORK/results}"
mkdir -p "$OUT"

SERVER_PID=""
cleanup() {
    [ -z "$SERVER_PID" ] || stop_process "$SERVER_PID" 30
    rm -rf "$WORK"/data-* "$WORK/tessera" "$WORK/tessera-bench" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM


if [ -n "$START_ARG" ]; then
    START=$START_ARG
    END=$(( START + SPAN_S ))
else
    NOW=$(date +%s)
    END=$(( (NOW - 600) / INTERVAL_S * INTERVAL_S ))
    START=$(( END - SPAN_S ))
fi
FLEET=(--nodes "$NODES" --interval "$INTERVAL" --start "$START" --span "$SPAN" --dcgm-fields "$FIELDS"
    --node-cpus 0 --no-kube --no-histograms --mean-job-minutes "$JOB_MINUTES")
SEND=(--stream --samples-per-series "$PER_SERIES" --batch-samples "$BATCH" --concurrency 2 --timeout 300s)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) CPUs, $(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "victoria-metrics: $(dpkg-query -W -f="\${Version}" victoria-metrics 2>/dev/null || echo n/a)"
    # The checkout's commit; with --no-build the binary may be another's (its path says).
    echo "tessera: checkout $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown), binary $TESSERA_GIVEN"
    echo "dataset: tessera-bench backfill ${FLEET[*]} ${SEND[*]}"
    echo "queries: $QUERIES, range $START..$END step $STEP, $REPS reps per fresh process"
    if [ -n "$REUSE" ]; then echo "tessera: queried the data folder an earlier run loaded ($REUSE), not loaded again"; fi
} > "$OUT/environment.txt"
cat "$OUT/environment.txt" >&2

# Starts $sys on $data; sets SERVER_PID and BASE. Limits are raised on both systems so
# that a query over everything is allowed to run (the point is to measure it).
start_server() {
    local sys="$1" data="$2" logf="$3" port
    port=$(free_port)
    BASE="http://127.0.0.1:$port"
    case "$sys" in
        tessera)
            cat > "$data/tessera.toml" <<EOF
[query]
timeout_secs = 600
max_samples = 1000000000
EOF
            "$TESSERA_BIN" serve --config "$data/tessera.toml" --listen "127.0.0.1:$port" --data-dir "$data/tessera" >> "$logf" 2>&1 &
            SERVER_PID=$!; READY="$BASE/-/ready" ;;
        victoriametrics)
            victoria-metrics -httpListenAddr="127.0.0.1:$port" -storageDataPath="$data/vm" -retentionPeriod=100y \
                -search.disableCache -search.maxQueryDuration=600s -search.maxSamplesPerQuery=100000000000 \
                -search.maxUniqueTimeseries=100000000 -search.maxSamplesPerSeries=100000000 \
                >> "$logf" 2>&1 &
            SERVER_PID=$!; READY="$BASE/health" ;;
        *) die "unknown system $sys" ;;
    esac
    local waited=0
    wait_ready "$READY" "$SERVER_PID" 300 || waited=$?
    case "$waited" in
        0) ;;
        2) tail -20 "$logf" >&2; die "$sys exited during start-up" ;;
        *) die "$sys not ready within 300 s" ;;
    esac
}

stop_server() {
    [ -n "$SERVER_PID" ] || return 0
    if [ "$1" = victoriametrics ]; then curl -fsS "$BASE/internal/force_flush" >/dev/null 2>&1 || true; fi
    stop_process "$SERVER_PID" 300 billion
    SERVER_PID=""
}

run_system() {
    local sys="$1" dir="$OUT/$1" data="$WORK/data-$1"
    mkdir -p "$dir" "$data"
    if [ "$sys" = tessera ] && [ -n "$REUSE" ]; then
        [ -d "$REUSE/tessera" ] || die "--reuse-tessera-data: no tessera/ folder in $REUSE"
        log "tessera: querying the data loaded earlier in $REUSE (no load)"
        (cd "$REUSE" && find . -type d -exec mkdir -p "$data/{}" \; \
            && find . -type f -name '*.sst' -exec ln {} "$data/{}" \; \
            && find . -type f ! -name '*.sst' -exec cp {} "$data/{}" \;)
    else
        load_system "$sys" "$dir" "$data"
    fi
    query_system "$sys" "$dir" "$data"
    if [ "$sys" = tessera ] && [ -n "$KEEP" ]; then
        mv "$data" "$KEEP"
        log "tessera: data kept in $KEEP (query it again with --reuse-tessera-data $KEEP --start $START)"
    fi
    rm -rf "$data"
}

load_system() {
    local sys="$1" dir="$2" data="$3"
    start_server "$sys" "$data" "$dir/server.log"
    local cpu0 cpu1 t0 t1
    cpu0=$(cpu_seconds "$SERVER_PID"); t0=$(date +%s.%N)
    log "$sys: loading ($BASE)"
    "$BENCH_BIN" backfill --url "$BASE/api/v1/write" "${FLEET[@]}" "${SEND[@]}" --json "$dir/load.json" > "$dir/load.txt" 2>&1 \
        || { tail -5 "$dir/load.txt" >&2; die "$sys: the load failed (see $dir/load.txt)"; }
    t1=$(date +%s.%N); cpu1=$(cpu_seconds "$SERVER_PID")
    local load_hwm; load_hwm=$(vmhwm_kib "$SERVER_PID")
    grep -E '^(dataset|push)' "$dir/load.txt" | sed 's/^/    /' >&2
    stop_server "$sys"
    local disk; disk=$(du_bytes "$data")
    jq -n --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
        --argjson cpu "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" \
        --argjson hwm "$load_hwm" --argjson disk "$disk" \
        '{load_wall_s: $wall, load_server_cpu_s: $cpu, load_peak_rss_kib: $hwm, disk_bytes: $disk}' > "$dir/load-proc.json"
    log "$sys: $(tr -d '\n ' < "$dir/load-proc.json")"
}

query_system() {
    local sys="$1" dir="$2" data="$3" name expr
    while IFS= read -r line; do
        case "$line" in ''|'#'*) continue ;; esac
        name="${line%%:*}"; expr="${line#*: }"
        printf '%s: %s\n' "$name" "$expr" > "$dir/$name.promql"
        start_server "$sys" "$data" "$dir/server.log"
        local base_hwm; base_hwm=$(vmhwm_kib "$SERVER_PID")
        log "$sys: $name"
        "$BENCH_BIN" query --url "$BASE" --file "$dir/$name.promql" --start "$START" --end "$END" --step "$STEP" \
            --reps "$REPS" --timeout 600s --json "$dir/$name.json" > "$dir/$name.txt" 2>&1 \
            || log "$sys: $name failed (see $dir/$name.txt)"
        local hwm; hwm=$(vmhwm_kib "$SERVER_PID")
        # What the query's selectors cover: the same selectors under count_over_time
        # over the whole range, summed (run after the measurement, in the same process).
        local sel covered
        sel=$(sed -n "s/^#covers $name: *//p" "$QUERIES")
        covered=null
        if [ -n "$sel" ]; then
            covered=$(curl -fsS "$BASE/api/v1/query" --data-urlencode "query=sum(count_over_time(${sel}[$((SPAN_S + 600))s]))" \
                --data-urlencode "time=$END" | jq -r '.data.result[0].value[1] // "null"')
        fi
        stop_server "$sys"
        jq --argjson hwm "$hwm" --argjson base "$base_hwm" --argjson covered "$covered" \
            '{name: .queries[0].name, expr: .queries[0].expr, ok: .queries[0].ok, errors: .queries[0].errors,
              first_error: .queries[0].first_error, series: .queries[0].series, points: .queries[0].points,
              p50_ms: .queries[0].latency.p50_ms, max_ms: .queries[0].latency.max_ms,
              peak_rss_kib: $hwm, rss_before_kib: $base, samples_covered: ($covered | tonumber? // null)}' \
            "$dir/$name.json" > "$dir/$name.result.json"
        log "$sys: $(jq -c '{p50_ms, max_ms, peak_rss_kib, samples_covered, series, errors}' "$dir/$name.result.json")"
    done < "$QUERIES"
}

IFS=',' read -r -a SYS_LIST <<< "$SYSTEMS"
for sys in "${SYS_LIST[@]}"; do run_system "$sys"; done

# One table: per query and system, wall time (median of the reps), peak RSS of the
# process, samples covered and samples per second.
{
    echo "| query | system | wall p50 (ms) | max (ms) | peak RSS (MiB) | samples covered | samples/s | series out | errors |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for f in "$OUT"/*/*.result.json; do
        sys=$(basename "$(dirname "$f")")
        jq -r --arg sys "$sys" '[.name, $sys, (.p50_ms | floor), (.max_ms | floor), ((.peak_rss_kib / 1024) | floor),
            (.samples_covered // "n/a"), (if .samples_covered then ((.samples_covered / (.p50_ms / 1000)) | floor) else "n/a" end),
            .series, .errors] | "| " + (map(tostring) | join(" | ")) + " |"' "$f"
    done | sort
    echo
    for sys in "${SYS_LIST[@]}"; do
        [ -f "$OUT/$sys/load.json" ] || continue
        jq -r --arg sys "$sys" --slurpfile p "$OUT/$sys/load-proc.json" \
            '"\($sys) load: \(.push.samples_ok) samples in \(.push.elapsed_s | floor) s = \(.push.samples_per_s | floor) samples/s, server CPU \($p[0].load_server_cpu_s | floor) s, peak RSS \(($p[0].load_peak_rss_kib / 1024) | floor) MiB, \(.dataset.series_created) series created, disk \(($p[0].disk_bytes / 1048576) | floor) MiB = \(($p[0].disk_bytes / .push.samples_ok * 1000 | floor) / 1000) B/sample"' \
            "$OUT/$sys/load.json"
    done
} | tee "$OUT/table.md"
log "results in $OUT"
