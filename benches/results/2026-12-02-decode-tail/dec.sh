#!/bin/bash
# usage: dec.sh BIN [filter] -- chunk decode M samples/s
cd /work/main/benches
$1 --bench "${2:-chunk_decode_120}" --warm-up-time 1 --measurement-time 2 --noplot --discard-baseline --output-format bencher 2>/dev/null | awk '/^test/{printf "%s %.1f M/s\n", $2, 120000/$5}'
