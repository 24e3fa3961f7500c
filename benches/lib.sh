# Helpers shared by the benchmark scripts (compare.sh, billion.sh): durations, ports and
# what /proc says about a process. Sourced, not run.

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
