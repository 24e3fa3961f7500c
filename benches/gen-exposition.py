#!/usr/bin/env python3
"""Writes a Prometheus text exposition file with a millisecond timestamp on every
sample, for measuring `tessera import`: DCGM-like GPU series (dcgm-exporter's label set)
scraped in rounds, each round one line per series, rounds in time order.

    benches/gen-exposition.py --nodes 10 --rounds 2880 --out /tmp/fleet.prom

Deterministic (fixed seed); values are gauges and counters with noise, like the
remote-write generator's.
"""
import argparse
import random

FIELDS = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "counter"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "counter"),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=10)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2880)
    p.add_argument("--interval-ms", type=int, default=30000)
    p.add_argument("--start-ms", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rng = random.Random(1)
    series = []
    for n in range(a.nodes):
        host = f"node-{n:04d}"
        for g in range(a.gpus):
            for name, kind in FIELDS:
                labels = (
                    f'{name}{{gpu="{g}",UUID="GPU-{n:04d}-{g}",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",'
                    f'Hostname="{host}",cluster="c{n % 2}",container="trainer",namespace="ml",'
                    f'pod="train-{n}-{g}",job="dcgm",instance="{host}:9400"}}'
                )
                series.append([labels, kind, rng.uniform(0, 100)])
    with open(a.out, "w") as f:
        for r in range(a.rounds):
            t = a.start_ms + r * a.interval_ms + rng.randint(-5, 5)
            out = []
            for s in series:
                if s[1] == "counter":
                    s[2] += rng.uniform(0, 1000)
                else:
                    s[2] = max(0.0, s[2] + rng.uniform(-2, 2))
                out.append(f"{s[0]} {s[2]:.3f} {t}\n")
            f.write("".join(out))


if __name__ == "__main__":
    main()
