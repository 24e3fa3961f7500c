#!/usr/bin/env bash
# One round of the same-run before/after: old binary, new binary, VictoriaMetrics; one system at a time.
set -u
r=$1
cd /work/wt-ingest
TESSERA_BIN=/tmp/ingest-before/tessera BENCH_BIN=/tmp/ingest-before/tessera-bench \
  benches/compare.sh --no-build --systems tessera --runs 1 --reps 1 --out /tmp/ingest-ba/old-$r
TESSERA_BIN=/tmp/ingest-a3/tessera BENCH_BIN=/tmp/ingest-before/tessera-bench \
  benches/compare.sh --no-build --systems tessera --runs 1 --reps 1 --out /tmp/ingest-ba/new-$r
BENCH_BIN=/tmp/ingest-before/tessera-bench \
  benches/compare.sh --no-build --systems victoriametrics --runs 1 --reps 1 --out /tmp/ingest-ba/vm-$r
