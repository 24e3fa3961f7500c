# syntax=docker/dockerfile:1
# The `tessera` image: one binary for every role (serve, ingester, distributor,
# querier, gateway), run as an unprivileged user. Build from the repository root:
#   docker build -t tessera:dev .
# A cold build compiles RocksDB in release mode: about 25 minutes on 2 cores; the
# cache mounts below keep the registry and target directory for the next build.
# Used by deploy/compose/compose.yaml and deploy/kubernetes/ (image `tessera`).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
WORKDIR /src
# libclang for bindgen in librocksdb-sys; the same list the developers and CI install.
COPY scripts/install-deps scripts/install-deps
RUN scripts/install-deps build && rm -rf /var/lib/apt/lists/*
COPY . .
# --workspace as everywhere in this repository (a subset unifies features differently);
# --locked: exactly the dependency versions of Cargo.lock.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --workspace --locked \
    && install -D -m 0755 target/release/tessera /out/tessera

FROM debian:${DEBIAN_RELEASE}-slim
# The binary links glibc and libstdc++ (RocksDB is C++); the compression libraries are
# built into it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
# uid/gid 10001: the runAsUser/fsGroup of deploy/kubernetes. /var/lib/tessera is the
# data directory; a new Docker volume mounted there starts owned by this user.
RUN groupadd --system --gid 10001 tessera \
    && useradd --system --uid 10001 --gid tessera --home-dir /var/lib/tessera --no-create-home \
       --shell /usr/sbin/nologin tessera \
    && install -d -o tessera -g tessera -m 0750 /var/lib/tessera
COPY --from=builder /out/tessera /usr/local/bin/tessera
# Health check helper for compose (`tessera-probe PORT PATH`); the image has no curl.
COPY --chmod=0755 deploy/docker/tessera-probe /usr/local/bin/tessera-probe
USER 10001:10001
WORKDIR /var/lib/tessera
# 9201: HTTP of serve, gateway, distributor and querier; 9202: HTTP of an ingester
# (probes, /metrics); 9095: an ingester's gRPC. No HEALTHCHECK here: the port to probe
# depends on the role; compose.yaml and the Kubernetes probes say it per role.
EXPOSE 9201 9202 9095
ENTRYPOINT ["/usr/local/bin/tessera"]
# Without arguments: the all-in-one node, reachable from outside the container.
CMD ["serve", "--listen=0.0.0.0:9201", "--data-dir=/var/lib/tessera"]
