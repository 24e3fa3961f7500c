#!/bin/bash
# usage: tun.sh TUNABLES -- a fresh server on /tmp/bdata2 (warm page cache) with GLIBC_TUNABLES=$1, the all-samples query twice
# (This session's own copy of the loop became ../2026-12-03-count-timestamps/ab.sh; the output format
# differs only in the label: `[tessera TUNABLES]` instead of `[TUNABLES]`, `[tessera]` instead of `[default]`.)
GLIBC_TUNABLES="$1" exec "$(dirname "$0")/../2026-12-03-count-timestamps/ab.sh" /work/targets/release/release/tessera
