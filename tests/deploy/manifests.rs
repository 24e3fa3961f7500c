//! Loading the deployment files and the facts the checks compare them with: the
//! endpoints of each role, the effective ports of a process, `tessera check-config`.

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera_server::Config;
use yaml_rust2::{Yaml, YamlLoader};

/// The repository root (the test binary is built from `server/`).
pub fn repo_root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
        .join("..")
}

/// The HTTP endpoints every role serves (issue 9, point 1: `/-/healthy`, `/-/ready`,
/// `/metrics` for all; the cluster roles add the placement and peer-health status).
/// `serve`'s are also checked against the running binary (`image.rs`).
pub fn endpoints(role: &str) -> &'static [&'static str] {
    match role {
        "serve" => &["/-/healthy", "/-/ready", "/metrics"],
        "ingester" | "distributor" | "querier" | "gateway" => {
            &["/-/healthy", "/-/ready", "/metrics", "/api/v1/status/cluster"]
        }
        other => panic!("{other:?} is not a tessera role"),
    }
}

/// Every YAML document in a file.
pub fn load_yaml(path: &Path) -> Vec<Yaml> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()));
    docs.into_iter().map(resolve_merge_keys).collect()
}

/// Applies YAML merge keys (`<<: *anchor`), which compose files use and YAML 1.2
/// parsers leave as a plain `<<` key: the anchor's entries are added where the mapping
/// does not set them itself.
fn resolve_merge_keys(doc: Yaml) -> Yaml {
    match doc {
        Yaml::Hash(h) => {
            let merge_key = Yaml::String("<<".into());
            let mut out = yaml_rust2::yaml::Hash::new();
            let mut merged = None;
            for (k, v) in h {
                if k == merge_key {
                    merged = Some(resolve_merge_keys(v));
                } else {
                    out.insert(k, resolve_merge_keys(v));
                }
            }
            if let Some(Yaml::Hash(base)) = merged {
                for (k, v) in base {
                    out.entry(k).or_insert(v);
                }
            }
            Yaml::Hash(out)
        }
        Yaml::Array(a) => Yaml::Array(a.into_iter().map(resolve_merge_keys).collect()),
        other => other,
    }
}

/// A string field, or a panic naming it.
pub fn str_of<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str().unwrap_or_else(|| panic!("{what}: expected a string, got {y:?}"))
}

/// An integer field, or a panic naming it.
pub fn int_of(y: &Yaml, what: &str) -> i64 {
    y.as_i64().unwrap_or_else(|| panic!("{what}: expected an integer, got {y:?}"))
}

/// A list field (missing = empty).
pub fn list_of(y: &Yaml) -> &[Yaml] {
    y.as_vec().map(Vec::as_slice).unwrap_or(&[])
}

/// The string items of a list.
pub fn strings(y: &Yaml, what: &str) -> Vec<String> {
    list_of(y).iter().map(|s| str_of(s, what).to_owned()).collect()
}

/// The port of `host:port`.
pub fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or_else(|| panic!("{addr:?} is not host:port"))
}

/// The value of `--name=VALUE` (or `--name VALUE`) in a command line.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&prefix) {
            Some(v.to_owned())
        } else if *a == format!("--{name}") {
            args.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// Runs `tessera check-config --role ROLE FILE` and asserts it accepts the file.
pub fn assert_check_config_ok(role: &str, file: &Path) {
    let out = Command::new(crate::harness::tessera_binary())
        .args(["check-config", "--role", role])
        .arg(file)
        .output()
        .expect("run tessera check-config");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tessera check-config --role {role} {} failed ({}):\n{stdout}{}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = format!("ok: {role} config {} is valid", file.display());
    assert_eq!(stdout.lines().next(), Some(expected.as_str()), "{stdout}");
}

/// How one process of a deployment runs: its role and command line, and the config
/// file it reads.
pub struct Process {
    pub name: String,
    pub role: String,
    pub args: Vec<String>,
    pub config: Config,
}

impl Process {
    /// The HTTP port: `--listen` if given, else the config's `listen`.
    pub fn http_port(&self) -> u16 {
        match flag(&self.args, "listen") {
            Some(addr) => port_of(&addr),
            None => self.config.listen.port(),
        }
    }

    /// The HTTP listen address as the process will bind it.
    pub fn http_listen(&self) -> String {
        flag(&self.args, "listen").unwrap_or_else(|| self.config.listen.to_string())
    }

    /// The data directory: `--data-dir` if given, else the config's.
    pub fn data_dir(&self) -> String {
        flag(&self.args, "data-dir").unwrap_or_else(|| self.config.data_dir.display().to_string())
    }

    /// An ingester's gRPC port: `--grpc-listen` if given, else the port of its own
    /// `addr` in `[cluster]` (the contract of `tessera ingester`).
    pub fn grpc_port(&self, id: &str) -> u16 {
        if let Some(addr) = flag(&self.args, "grpc-listen") {
            return port_of(&addr);
        }
        let ingesters = self.config.cluster.ingesters();
        let me = ingesters.iter().find(|e| e.id == id);
        port_of(&me.unwrap_or_else(|| panic!("{}: id {id:?} is not in [cluster]", self.name)).addr)
    }
}

/// Parses a config file as the server does.
pub fn load_config(path: &Path) -> Config {
    Config::from_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
