//! `deploy/compose/compose.yaml`: three ingesters and a gateway on one host.

use std::collections::BTreeSet;
use std::path::PathBuf;

use yaml_rust2::Yaml;

use crate::manifests::*;

fn dir() -> PathBuf {
    repo_root().join("deploy/compose")
}

struct Service<'a> {
    name: String,
    spec: &'a Yaml,
    process: Process,
    config_file: PathBuf,
}

/// Every service as the process it runs, with the config file it mounts.
fn services(doc: &Yaml) -> Vec<Service<'_>> {
    let mut out = Vec::new();
    for (name, spec) in doc["services"].as_hash().expect("services mapping") {
        let name = str_of(name, "service name").to_owned();
        let args = strings(&spec["command"], "command");
        let role = args.first().unwrap_or_else(|| panic!("{name}: no command")).clone();
        let config_path = flag(&args, "config").unwrap_or_else(|| panic!("{name}: no --config"));
        // The file reaches the container as a compose config (`configs:`).
        let cfg = list_of(&spec["configs"])
            .iter()
            .find(|c| c["target"].as_str() == Some(config_path.as_str()))
            .unwrap_or_else(|| panic!("{name}: {config_path} is no config target"));
        let source = str_of(&cfg["source"], "config source");
        let file = dir().join(str_of(&doc["configs"][source]["file"], "configs file"));
        let config = load_config(&file);
        out.push(Service {
            name: name.clone(),
            spec,
            process: Process { name, role, args, config },
            config_file: file,
        });
    }
    out
}

fn compose() -> Yaml {
    load_yaml(&dir().join("compose.yaml")).remove(0)
}

/// `tessera-probe PORT PATH` of a service's health check.
fn health_probe(s: &Service) -> (u16, String) {
    let test = strings(&s.spec["healthcheck"]["test"], "healthcheck test");
    match test.as_slice() {
        [cmd, probe, port, path] if cmd == "CMD" && probe == "tessera-probe" => {
            (port.parse().unwrap_or_else(|_| panic!("{}: port {port}", s.name)), path.clone())
        }
        other => panic!("{}: health check {other:?} is not [CMD, tessera-probe, PORT, PATH]", s.name),
    }
}

fn seconds(duration: &str) -> i64 {
    let (n, unit) = duration.split_at(duration.find(|c: char| !c.is_ascii_digit()).unwrap_or(duration.len()));
    let n: i64 = n.parse().unwrap_or_else(|_| panic!("duration {duration:?}"));
    match unit {
        "s" => n,
        "m" => 60 * n,
        other => panic!("duration unit {other:?} in {duration:?}"),
    }
}

#[test]
fn the_compose_config_passes_check_config_for_every_role_it_runs() {
    let doc = compose();
    let svcs = services(&doc);
    let roles: BTreeSet<_> = svcs.iter().map(|s| s.process.role.as_str()).collect();
    assert_eq!(roles, BTreeSet::from(["gateway", "ingester"]));
    for s in &svcs {
        assert_check_config_ok(&s.process.role, &s.config_file);
    }
}

#[test]
fn three_ingesters_each_with_its_id_address_port_and_volume() {
    let doc = compose();
    let svcs = services(&doc);
    let ingesters: Vec<_> = svcs.iter().filter(|s| s.process.role == "ingester").collect();
    assert_eq!(ingesters.len(), 3);
    let cluster = &ingesters[0].process.config.cluster;
    assert_eq!(cluster.replication_factor, 3);
    assert_eq!(cluster.write_quorum(), 2);
    let members = cluster.ingesters();
    assert_eq!(members.len(), ingesters.len(), "every member of [cluster] runs once");
    let mut volumes = BTreeSet::new();
    for s in &ingesters {
        let id = flag(&s.process.args, "id").unwrap_or_else(|| panic!("{}: no --id", s.name));
        let member = members.iter().find(|m| m.id == id).unwrap_or_else(|| panic!("{}: id {id} unknown", s.name));
        // Peers dial the service name on the port the ingester binds.
        let (host, _) = member.addr.rsplit_once(':').expect("host:port");
        assert_eq!(host, s.name, "ingester {id}'s addr must be its service name");
        assert_eq!(s.process.grpc_port(&id), port_of(&member.addr));
        assert!(s.process.http_port() != s.process.grpc_port(&id), "{}: HTTP and gRPC on one port", s.name);
        // Its own named volume at the data directory.
        let data_dir = s.process.data_dir();
        let vols = strings(&s.spec["volumes"], "volumes");
        let vol = vols
            .iter()
            .find_map(|v| v.strip_suffix(&format!(":{data_dir}")))
            .unwrap_or_else(|| panic!("{}: no volume at {data_dir}", s.name));
        assert!(!doc["volumes"][vol].is_badvalue(), "{}: volume {vol} is not declared", s.name);
        assert!(volumes.insert(vol.to_owned()), "{}: volume {vol} is shared", s.name);
    }
}

#[test]
fn health_checks_and_published_ports_use_each_process_http_port() {
    let doc = compose();
    for s in services(&doc) {
        let (port, path) = health_probe(&s);
        assert_eq!(port, s.process.http_port(), "{}: health check port", s.name);
        assert!(endpoints(&s.process.role).contains(&path.as_str()), "{}: {path} is no endpoint", s.name);
        assert!(s.process.http_listen().starts_with("0.0.0.0:"), "{}: unreachable from other containers", s.name);
        for p in strings(&s.spec["ports"], "ports") {
            let container: u16 = p.rsplit(':').next().and_then(|c| c.parse().ok()).expect("ports entry");
            assert_eq!(container, s.process.http_port(), "{}: publishes {p}", s.name);
        }
    }
    let gateway = services(&doc).into_iter().find(|s| s.process.role == "gateway").expect("gateway");
    assert_eq!(strings(&gateway.spec["ports"], "ports"), ["127.0.0.1:9201:9201"]);
}

#[test]
fn stop_grace_periods_outlast_the_shutdown_timeout_and_the_image_is_built_here() {
    let doc = compose();
    for s in services(&doc) {
        let grace = seconds(str_of(&s.spec["stop_grace_period"], "stop_grace_period"));
        let timeout = i64::try_from(s.process.config.shutdown_timeout_secs).expect("secs");
        let margin = if s.process.role == "ingester" { 60 } else { 10 };
        assert!(grace >= timeout + margin, "{}: stop_grace_period {grace}s < {timeout}s + {margin}s", s.name);
        let context = dir().join(str_of(&s.spec["build"]["context"], "build context"));
        assert!(context.join("Dockerfile").is_file(), "{}: no Dockerfile in the build context", s.name);
    }
}

#[test]
fn merge_keys_are_resolved_without_overriding_the_service_own_keys() {
    const TEXT: &str = "a: &a {x: 1, y: 2}\nb: {<<: *a, y: 3}\n";
    let doc = yaml_rust2::YamlLoader::load_from_str(TEXT).expect("yaml");
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("merge.yaml");
    std::fs::write(&path, TEXT).expect("write");
    let resolved = load_yaml(&path).remove(0);
    assert_eq!(doc[0]["b"]["x"], Yaml::BadValue, "the parser leaves merge keys alone");
    assert_eq!(resolved["b"]["x"].as_i64(), Some(1));
    assert_eq!(resolved["b"]["y"].as_i64(), Some(3));
}
