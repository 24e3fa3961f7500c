#!/usr/bin/env bash
# tessera import of the same exposition file into a fresh directory, old and new binary, file in page cache.
set -u
cat /tmp/ingest-fleet.prom > /dev/null
for b in before a3 before a3; do
  rm -rf /tmp/ingest-imp-$b
  /usr/bin/time -v /tmp/ingest-$b/tessera import --data-dir /tmp/ingest-imp-$b /tmp/ingest-fleet.prom \
     >> /tmp/ingest-ba/import2-$b.txt 2>&1
  rm -rf /tmp/ingest-imp-$b
done
