# Helpers shared by the benchmark scripts (compare.sh, billion.sh): durations, ports,
# what /proc says about a process, and stopping one. Sourced, not run.

# "30s", "10m", "24h", "7d", "500ms" -> whole seconds.
to_seconds() {
    local v="$1"
    case "$v" in
        *ms) echo $(( ${v%ms} / 1000 )) ;;
        *s) echo "${v%s}" ;;
        *m) echo $(( ${v%m} * 60 )) ;;
        *h) echo $(( ${v%h} * 3600 )) ;;
        *d) echo $(( ${v%d} * 86400 )) ;;
        *) echo "$v" ;;
    esac
}

# A loopback port nothing listens on.
free_port() {
    local p
    while :; do
        p=$(( 20000 + RANDOM % 30000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
}

# utime + stime in seconds of a live process.
cpu_seconds() {
    local hz; hz=$(getconf CLK_TCK)
    # Fields after the ")" of the command name: utime is the 12th, stime the 13th.
    awk -v hz="$hz" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}

# Peak RSS (VmHWM) of a live process, KiB.
vmhwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# Apparent bytes under a folder.
du_bytes() { du -sb "$1" | awk '{ print $1 }'; }

# Stops process $1: SIGTERM, up to $2 seconds for it to exit, then SIGKILL (saying so
# on stderr when $3 is non-empty: the caller's log prefix). Returns at once if it is gone.
stop_process() {
    local pid="$1" secs="$2" who="${3:-}"
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $(( secs * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        [ -z "$who" ] || printf '[%s] pid %s did not stop within %s s of SIGTERM; killing it\n' "$who" "$pid" "$secs" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
