#!/usr/bin/env bash
# One-command side-by-side benchmark: Tessera vs Prometheus vs VictoriaMetrics on the
# same GPU-fleet dataset, on this machine, in one run.
#
#   benches/compare.sh                      # default size (~10-15 min on 2 cores)
#   benches/compare.sh --nodes 2000 --span 10m --runs 1 --reps 1   # memory per series
#   benches/compare.sh --help
#
# For each run and each system it starts a fresh server on loopback with a throwaway
# data folder, backfills the identical dataset with tessera-bench (same flags, same
# --start, same seed), reads CPU and peak RSS from /proc, replays the dashboard
# queries over the whole ingested range, measures the bytes on disk after the
# system's own flush step, and stops the server. At the end it prints one table
# (medians over runs, Tessera's ratios to each peer). Everything it started is
# stopped on exit, including on Ctrl-C.
#
# Measurement rules (the same for every system):
# - ingest samples/s: samples acknowledged / wall time of the push (client side).
# - CPU s per million samples: utime+stime of the server process (/proc/PID/stat)
#   from just before the push to just after it, per million acknowledged samples.
#   Background work a system defers past the end of the push is not counted.
# - peak RSS: VmHWM of the server process (/proc/PID/status) right after the push.
# - bytes/sample: the complete on-disk footprint a restart needs, after the
#   system's own flush step, divided by samples acknowledged:
#     Prometheus      - a TSDB snapshot (POST /api/v1/admin/tsdb/snapshot), i.e. the
#                       persisted blocks with the head written out as a block; the
#                       WAL is not needed once a block exists, so it is not counted.
#     VictoriaMetrics - `du` of data/ and indexdb/ after GET /internal/force_flush
#                       and a clean stop (VictoriaMetrics has no WAL; the caches
#                       it writes to cache/ at stop are not counted).
#     Tessera         - `du` of the data folder after SIGTERM (its shutdown flushes
#                       open chunks and truncates its WAL), minus RocksDB's text
#                       info logs (`LOG`, `LOG.old.*`: diagnostics, like the other
#                       systems' stderr, which is not counted either); every data,
#                       WAL, MANIFEST and OPTIONS file counts. The breakdown per
#                       column family goes to RUN/disk-usage.md
#                       (`tessera-bench disk-usage`).
#   `du -sb` (apparent bytes) is used for all three.
# - query latency: each dashboard query (benches/queries/dashboard.promql) runs
#   --reps times back to back as a range query over the whole dataset at --step;
#   the table shows the median over runs of the p50 and p90 over all executions.
#   VictoriaMetrics runs with -search.disableCache so repeats are not served from
#   its result cache (Prometheus and Tessera have none).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
. "$ROOT/benches/lib.sh"

NODES=10
SPAN=24h
INTERVAL=30s
RUNS=3
REPS=3
STEP=60s
CONCURRENCY=4
BATCH=2000
PROTOCOL=1
SEED=1
SYSTEMS="tessera,prometheus,victoriametrics"
OUT=""
BUILD=1
EXTRA_FLEET=()
CLUSTER_INGESTERS=3
CLUSTER_RF=3
CLUSTER_COMPRESSION=none
CLUSTER_PUSHDOWN=on

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF

Options (defaults in brackets):
  --nodes N            GPU nodes, 8 GPUs each [$NODES]
  --span D             simulated time span, e.g. 24h, 10m [$SPAN]
  --interval D         scrape interval [$INTERVAL]
  --runs N             runs per system; the table shows medians [$RUNS]
  --reps N             executions of each dashboard query per run [$REPS]
  --step D             range-query step [$STEP]
  --concurrency N      remote-write shards [$CONCURRENCY]
  --batch-samples N    samples per request [$BATCH]
  --protocol 1|2       remote-write version (2 only for systems that support it) [$PROTOCOL]
  --seed N             dataset seed [$SEED]
  --systems LIST       comma-separated subset of: $SYSTEMS,tessera-cluster
                       (tessera-cluster: scripts/cluster on loopback, every process measured)
  --cluster-ingesters N  ingesters of tessera-cluster [$CLUSTER_INGESTERS]
  --cluster-rf R       replication factor of tessera-cluster [$CLUSTER_RF]
  --cluster-compression none|gzip  [cluster] grpc_compression of tessera-cluster [$CLUSTER_COMPRESSION]
  --cluster-pushdown on|off  [cluster] query_pushdown of tessera-cluster [$CLUSTER_PUSHDOWN]
  --out DIR            results folder [a new folder under /tmp]
  --no-build           use existing release binaries (TESSERA_BIN, BENCH_BIN or target/release)
  --fleet-arg ARG      pass ARG through to tessera-bench (repeatable), e.g. --fleet-arg=--node-cpus=64
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES="$2"; shift 2 ;;
        --span) SPAN="$2"; shift 2 ;;
        --interval) INTERVAL="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --step) STEP="$2"; shift 2 ;;
        --concurrency) CONCURRENCY="$2"; shift 2 ;;
        --batch-samples) BATCH="$2"; shift 2 ;;
        --protocol) PROTOCOL="$2"; shift 2 ;;
        --seed) SEED="$2"; shift 2 ;;
        --systems) SYSTEMS="$2"; shift 2 ;;
        --cluster-ingesters) CLUSTER_INGESTERS="$2"; shift 2 ;;
        --cluster-rf) CLUSTER_RF="$2"; shift 2 ;;
        --cluster-compression) CLUSTER_COMPRESSION="$2"; shift 2 ;;
        --cluster-pushdown) CLUSTER_PUSHDOWN="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --fleet-arg) EXTRA_FLEET+=("$2"); shift 2 ;;
        --fleet-arg=*) EXTRA_FLEET+=("${1#--fleet-arg=}"); shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[compare %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

SPAN_S=$(to_seconds "$SPAN")
INTERVAL_S=$(to_seconds "$INTERVAL")

# --- peers installed? ------------------------------------------------------------
need_pkgs=()
case ",$SYSTEMS," in *,prometheus,*) command -v prometheus >/dev/null || need_pkgs+=(prometheus) ;; esac
case ",$SYSTEMS," in *,victoriametrics,*) command -v victoria-metrics >/dev/null || need_pkgs+=(victoria-metrics) ;; esac
if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]} (Debian packages)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    # --no-install-recommends keeps out prometheus-node-exporter (a third service).
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null \
        || die "could not install ${need_pkgs[*]}; install them and rerun"
    # Where systemd runs, the packages start services on the default ports; we use
    # our own instances only.
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now prometheus victoria-metrics 2>/dev/null || true
    fi
fi

# --- binaries --------------------------------------------------------------------
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "$BUILD" = 1 ]; then
    log "building release binaries (cargo build --release --workspace)"
    (cd "$ROOT" && cargo build --release --workspace >&2)
fi
TESSERA_BIN="${TESSERA_BIN:-$TARGET_DIR/release/tessera}"
BENCH_BIN="${BENCH_BIN:-$TARGET_DIR/release/tessera-bench}"
[ -x "$BENCH_BIN" ] || die "no tessera-bench binary at $BENCH_BIN"
case ",$SYSTEMS," in *,tessera,*|*,tessera-cluster,*) [ -x "$TESSERA_BIN" ] || die "no tessera binary at $TESSERA_BIN" ;; esac
# Copy the binaries: the shared target folder may be rebuilt while we measure.
WORK="$(mktemp -d /tmp/tessera-compare.XXXXXX)"
cp "$BENCH_BIN" "$WORK/tessera-bench"; BENCH_BIN="$WORK/tessera-bench"
TESSERA_GIVEN="$TESSERA_BIN"
if [ -x "$TESSERA_BIN" ]; then cp "$TESSERA_BIN" "$WORK/tessera"; TESSERA_BIN="$WORK/tessera"; fi
OUT="${OUT:-$WORK/results}"
mkdir -p "$OUT"

# --- process bookkeeping -----------------------------------------------------------
SERVER_PID=""
CLUSTER_DIR=""
cleanup() {
    if [ -n "$CLUSTER_DIR" ] && [ -d "$CLUSTER_DIR" ]; then "$ROOT/scripts/cluster" stop "$CLUSTER_DIR" >/dev/null 2>&1 || true; fi
    [ -z "$SERVER_PID" ] || stop_process "$SERVER_PID" 10
    # Data folders and the copied binaries are throwaway; results stay.
    rm -rf "$WORK"/data-* "$WORK/tessera" "$WORK/tessera-bench" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Sums over several processes (a cluster): CPU seconds and peak RSS.
cpu_seconds_all() { local t=0 p; for p in "$@"; do t=$(awk -v a="$t" -v b="$(cpu_seconds "$p")" 'BEGIN { print a + b }'); done; echo "$t"; }
vmhwm_kib_all() { local t=0 p; for p in "$@"; do t=$(( t + $(vmhwm_kib "$p") )); done; echo "$t"; }
# Bytes sent over the loopback interface so far (every local TCP byte, both directions
# counted once). The difference between a cluster run and an all-in-one run of the
# same push is the traffic between the cluster's processes.
lo_bytes() { awk -F'[: ]+' '$2 == "lo" { print $11 }' /proc/net/dev; }

stop_server() {
    stop_process "$1" 60 compare
    SERVER_PID=""
}

# --- dataset ---------------------------------------------------------------------
# One start time for every system and run: the span ending 10 minutes ago, aligned
# to the interval. Equal flags + equal start + equal seed = identical requests.
NOW=$(date +%s)
END=$(( (NOW - 600) / INTERVAL_S * INTERVAL_S ))
START=$(( END - SPAN_S ))
FLEET=(--nodes "$NODES" --interval "$INTERVAL" --seed "$SEED" --start "$START" --span "$SPAN" "${EXTRA_FLEET[@]}")
SEND=(--concurrency "$CONCURRENCY" --batch-samples "$BATCH" --protocol "$PROTOCOL")

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) CPUs, $(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "kernel: $(uname -r)"
    echo "prometheus: $(prometheus --version 2>&1 | head -1 || echo n/a)"
    echo "victoria-metrics: $(dpkg-query -W -f="\${Version}" victoria-metrics 2>/dev/null || echo n/a)"
    # The checkout's commit; with --no-build the binary may be another's (its path says).
    echo "tessera: checkout $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown), binary $TESSERA_GIVEN"
    echo "dataset: tessera-bench backfill ${FLEET[*]} ${SEND[*]}"
    echo "queries: $ROOT/benches/queries/dashboard.promql, range $START..$END step $STEP, $REPS reps"
} > "$OUT/environment.txt"
cat "$OUT/environment.txt" >&2

# --- one measured run of one system --------------------------------------------------
run_one() {
    local sys="$1" run="$2"
    local dir="$OUT/$sys/run$run" data="$WORK/data-$sys-$run" port
    mkdir -p "$dir" "$data"
    port=$(free_port)
    local base="http://127.0.0.1:$port" write ready
    case "$sys" in
        prometheus)
            printf 'global:\n  scrape_interval: 15s\n' > "$data/prometheus.yml"
            prometheus --config.file="$data/prometheus.yml" --storage.tsdb.path="$data/tsdb" \
                --storage.tsdb.retention.time=3650d --web.listen-address="127.0.0.1:$port" \
                --web.enable-remote-write-receiver --web.enable-admin-api \
                > "$dir/server.log" 2>&1 &
            write="$base/api/v1/write"; ready="$base/-/ready" ;;
        victoriametrics)
            victoria-metrics -httpListenAddr="127.0.0.1:$port" -storageDataPath="$data/vm" \
                -retentionPeriod=100y -search.disableCache \
                > "$dir/server.log" 2>&1 &
            write="$base/api/v1/write"; ready="$base/health" ;;
        tessera-cluster)
            # N ingesters (RF 3) and one gateway, started by scripts/cluster on the
            # same binary; the push and the queries go to the gateway.
            TESSERA_BIN="$TESSERA_BIN" "$ROOT/scripts/cluster" start "$data/cluster" \
                --ingesters "$CLUSTER_INGESTERS" --rf "$CLUSTER_RF" --grpc-compression "$CLUSTER_COMPRESSION" --pushdown "$CLUSTER_PUSHDOWN" \
                --http "127.0.0.1:$port" \
                > "$dir/server.log" 2>&1 || log "tessera-cluster run $run: scripts/cluster start failed"
            CLUSTER_PIDS=()
            for f in "$data"/cluster/*.pid; do [ -f "$f" ] && CLUSTER_PIDS+=("$(cat "$f")"); done
            write="$base/api/v1/write"; ready="$base/-/ready" ;;
        tessera)
            # shellcheck disable=SC2086
            "$TESSERA_BIN" serve --listen "127.0.0.1:$port" --data-dir "$data/tessera" ${TESSERA_SERVE_ARGS:-} \
                > "$dir/server.log" 2>&1 &
            write="$base/api/v1/write"; ready="$base/-/ready" ;;
        *) die "unknown system $sys" ;;
    esac
    local pids
    if [ "$sys" = tessera-cluster ]; then
        # The gateway stands for the cluster in the liveness checks below; every
        # process counts for CPU and memory.
        SERVER_PID=$(cat "$data/cluster/gateway-0.pid" 2>/dev/null || echo 0)
        CLUSTER_DIR="$data/cluster"
        pids=("${CLUSTER_PIDS[@]}")
    else
        SERVER_PID=$!
        pids=("$SERVER_PID")
    fi
    local pid=$SERVER_PID
    if ! wait_ready "$ready" "$pid" 60; then
        # Record the failure and go on with the other systems: one broken server
        # must not cost the whole comparison.
        log "$sys run $run: did not become ready within 60 s; last log lines:"
        tail -20 "$dir/server.log" >&2
        stop_server "$pid"
        echo '{"cpu_s": null, "peak_rss_kib": null, "disk_bytes": null}' > "$dir/proc.json"
        rm -rf "$data"
        return
    fi

    local cpu0 cpu1 hwm lo0 lo1
    cpu0=$(cpu_seconds_all "${pids[@]}")
    lo0=$(lo_bytes)
    log "$sys run $run: backfill -> $write"
    if ! "$BENCH_BIN" backfill --url "$write" "${FLEET[@]}" "${SEND[@]}" --json "$dir/push.json" > "$dir/push.txt" 2>&1; then
        log "$sys run $run: push reported failures (see $dir/push.txt)"
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        log "$sys run $run: the server died during the push; last log lines:"
        tail -20 "$dir/server.log" >&2
        echo '{"cpu_s": null, "peak_rss_kib": null, "disk_bytes": null}' > "$dir/proc.json"
        SERVER_PID=""; rm -rf "$data"
        return
    fi
    cpu1=$(cpu_seconds_all "${pids[@]}")
    lo1=$(lo_bytes)
    hwm=$(vmhwm_kib_all "${pids[@]}")
    grep -E '^(push|latency|status|error)' "$dir/push.txt" | sed "s/^/    /" >&2 || true

    # Make everything searchable before querying.
    if [ "$sys" = victoriametrics ]; then curl -fsS "$base/internal/force_flush" >/dev/null || true; fi

    log "$sys run $run: dashboard queries"
    if ! "$BENCH_BIN" query --url "$base" --file "$ROOT/benches/queries/dashboard.promql" \
        --start "$START" --end "$END" --step "$STEP" --reps "$REPS" --json "$dir/query.json" > "$dir/query.txt" 2>&1; then
        log "$sys run $run: query run failed (see $dir/query.txt)"
    fi
    tail -1 "$dir/query.txt" | sed "s/^/    /" >&2

    local disk="null" total
    case "$sys" in
        prometheus)
            local snap
            snap=$(curl -fsS -X POST "$base/api/v1/admin/tsdb/snapshot" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p' || true)
            if [ -n "$snap" ]; then disk=$(du_bytes "$data/tsdb/snapshots/$snap"); fi
            stop_server "$pid"
            total=$(du_bytes "$data/tsdb") ;;
        victoriametrics)
            curl -fsS "$base/internal/force_flush" >/dev/null || log "force_flush failed"
            stop_server "$pid"
            # Measured after a clean stop: right after /internal/force_flush the folder
            # can still lack the newest in-memory parts (they were seen landing 10-15 s
            # later, ~10 % of the data of the 24 h dataset), which made this number vary
            # from 1.29 to 2.07 B/sample between runs. The stop writes everything; data/
            # and indexdb/ are what a restart needs (cache/, written at stop, is not).
            disk=$(( $(du_bytes "$data/vm/data") + $(du_bytes "$data/vm/indexdb") ))
            total=$(du_bytes "$data/vm") ;;
        tessera-cluster)
            "$ROOT/scripts/cluster" stop "$data/cluster" >> "$dir/server.log" 2>&1 || true
            SERVER_PID=""; CLUSTER_DIR=""
            total=$(du_bytes "$data/cluster")
            local logs
            logs=$(find "$data/cluster" -type f \( -name LOG -o -name 'LOG.old.*' -o -name '*.log' \) -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
            disk=$(( total - logs )) ;;
        tessera)
            stop_server "$pid"
            # Where the bytes go, per column family (needs a tessera-bench with disk-usage).
            local acked
            acked=$(sed -n 's/.*"samples_ok": *\([0-9]*\).*/\1/p' "$dir/push.json" 2>/dev/null | head -1)
            "$BENCH_BIN" disk-usage --data-dir "$data/tessera" ${acked:+--samples "$acked"} > "$dir/disk-usage.md" 2>&1 \
                || log "tessera run $run: disk-usage failed (see $dir/disk-usage.md)"
            total=$(du_bytes "$data/tessera")
            local logs
            logs=$(find "$data/tessera" -type f \( -name LOG -o -name 'LOG.old.*' \) -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
            disk=$(( total - logs )) ;;
    esac
    printf '{"cpu_s": %s, "peak_rss_kib": %s, "disk_bytes": %s, "data_dir_total_bytes": %s, "loopback_bytes": %s}\n' \
        "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" "${hwm:-null}" "$disk" "${total:-null}" \
        "$(( lo1 - lo0 ))" > "$dir/proc.json"
    log "$sys run $run: $(cat "$dir/proc.json")"
    rm -rf "$data"
}

IFS=',' read -r -a SYS_LIST <<< "$SYSTEMS"
for run in $(seq 1 "$RUNS"); do
    for sys in "${SYS_LIST[@]}"; do
        run_one "$sys" "$run"
    done
done

"$BENCH_BIN" table "$OUT" | tee "$OUT/table.md"
log "results in $OUT"
