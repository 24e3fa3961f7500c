# Helpers shared by the benchmark scripts (compare.sh, billion.sh, paired.sh,
# profile-ingest.sh): durations, ports, waiting for a server, what /proc says about a
# process, and stopping one.
# Sourced, not run.

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

# A loopback port nothing listens on, below the kernel's ephemeral range
# (`ip_local_port_range`) as the test harness picks them (tests/src/lib.rs `free_port`):
# one inside it may be taken, before the server binds it, as the local port of an
# outgoing connection (a benchmark client's, curl's), which failed billion.sh's start
# with "Address already in use".
free_port() {
    local p lo=10000 hi
    hi=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "${hi:-0}" -gt $(( lo + 1000 )) ] || hi=32768
    while :; do
        p=$(( lo + RANDOM % (hi - lo) ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
}

# Waits up to $3 seconds for URL $1 to answer 2xx while process $2 lives: 0 when it
# answered, 1 when the time ran out, 2 when the process exited first.
wait_ready() {
    local url="$1" pid="$2" secs="$3"
    for _ in $(seq 1 $(( secs * 10 ))); do
        kill -0 "$pid" 2>/dev/null || return 2
        curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
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
