//! The `Dockerfile` and `deploy/docker/tessera-probe`, the health check the compose
//! file runs inside the container; and the probe paths against the running binary.

use std::process::Command;

use crate::harness::Server;
use crate::manifests::*;

fn probe(port: u16, path: &str) -> (bool, String) {
    let out = Command::new("bash")
        .arg(repo_root().join("deploy/docker/tessera-probe"))
        .arg(port.to_string())
        .arg(path)
        .output()
        .expect("run tessera-probe");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `tessera serve` started with the Kubernetes config (listen and data directory
/// overridden as a test must): the probe paths the manifests use answer 200 on the
/// real binary, and `tessera-probe` tells 200 from anything else.
#[test]
fn probe_paths_answer_on_the_running_binary_and_tessera_probe_reads_the_status() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = std::fs::read_to_string(repo_root().join("deploy/kubernetes/tessera.toml")).expect("config");
    let server = Server::start_with_config(&tmp.path().join("data"), &config);
    for path in endpoints("serve") {
        let status = server.http().get(server.url(path)).send().expect("GET").status();
        assert_eq!(status, 200, "GET {path}");
        assert_eq!(probe(server.addr.port(), path), (true, String::new()), "tessera-probe {path}");
    }
    let (ok, stderr) = probe(server.addr.port(), "/no/such/endpoint");
    assert!(!ok);
    assert!(stderr.contains("404"), "{stderr}");
    let port = server.addr.port();
    drop(server);
    let (ok, stderr) = probe(port, "/-/healthy");
    assert!(!ok, "nothing listens on {port} any more");
    assert!(stderr.contains("no answer"), "{stderr}");
}

#[test]
fn tessera_probe_refuses_a_wrong_command_line() {
    let out = Command::new("bash").arg(repo_root().join("deploy/docker/tessera-probe")).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
}

#[test]
fn dockerfile_builds_the_workspace_and_ships_the_binary_unprivileged_with_every_port() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
    let stages: Vec<_> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "a builder and a runtime stage: {stages:?}");
    assert!(stages[0].contains("AS builder") && stages[1].contains("-slim"), "{stages:?}");
    assert!(text.contains("scripts/install-deps build"), "the builder installs libclang like CI");
    assert!(text.contains("cargo build --release --workspace --locked"));
    assert!(text.contains("COPY --from=builder /out/tessera /usr/local/bin/tessera"));
    for line in text.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from")) {
        let src = line.split_whitespace().rev().nth(1).expect("COPY src dst");
        assert!(src == "." || repo_root().join(src).exists(), "COPY of missing {src}");
    }
    let user = text.lines().find_map(|l| l.strip_prefix("USER ")).expect("USER");
    assert_ne!(user.split(':').next(), Some("0"), "runs as root");
    assert!(text.contains(&format!("--uid {}", user.split(':').next().expect("uid"))), "USER is the created user");
    let exposed: Vec<u16> = text
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace().map(|p| p.parse().expect("EXPOSE port")))
        .collect();
    // Every port a deployment listens on.
    let k8s = load_config(&repo_root().join("deploy/kubernetes/tessera.toml"));
    let compose = load_config(&repo_root().join("deploy/compose/tessera.toml"));
    let mut used = vec![k8s.listen.port(), compose.listen.port(), 9202];
    used.extend(k8s.cluster.ingesters().iter().chain(compose.cluster.ingesters().iter()).map(|e| port_of(&e.addr)));
    for port in used {
        assert!(exposed.contains(&port), "EXPOSE lacks {port}");
    }
    // The data directory the image prepares is the one the deployments use.
    assert!(text.contains(&format!("install -d -o tessera -g tessera -m 0750 {}", k8s.data_dir.display())));
    assert_eq!(k8s.data_dir, compose.data_dir);
}
