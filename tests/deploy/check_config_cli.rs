//! `tessera check-config` as a user runs it: exit status, the `ok` line, the errors.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::tessera_binary;
use crate::manifests::repo_root;

fn run(args: &[&str], file: &Path) -> Output {
    Command::new(tessera_binary()).arg("check-config").args(args).arg(file).output().expect("run check-config")
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write config");
    p
}

#[test]
fn a_valid_file_exits_0_with_the_ok_line_and_the_cluster_shape() {
    let file = repo_root().join("deploy/cluster/local.toml");
    let out = run(&["--role", "gateway"], &file);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(format!("ok: gateway config {} is valid", file.display()).as_str()));
    assert_eq!(
        lines.next().map(str::trim),
        Some("cluster: 16 shards, replication factor 3, write quorum 2, 3 ingesters, placement hrw-bounded-v1")
    );
}

#[test]
fn an_invalid_file_exits_2_naming_every_key_to_fix() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write(
        tmp.path(),
        "bad.toml",
        "[http]\nmax_connections = 0\n[cluster]\nreplication_factor = 3\ningester_count = 3\n",
    );
    let out = run(&["--role", "ingester"], &file);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("error: {}: http.max_connections must be > 0", file.display())), "{stderr}");
    assert!(stderr.contains("cluster.ingester_addr_template must contain {i}"), "{stderr}");
    assert!(stderr.contains("NOT valid"), "{stderr}");
    // The same file is fine for serve once the common error is fixed: [cluster] is ignored.
    let file = write(tmp.path(), "serve.toml", "[cluster]\ningester_count = 3\n");
    let out = run(&["--role", "serve"], &file);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ignored by `tessera serve`"));
}

#[test]
fn a_missing_cluster_table_a_typo_and_a_missing_file_exit_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cases = [
        (write(tmp.path(), "empty.toml", ""), "[cluster] table is missing"),
        (write(tmp.path(), "typo.toml", "[cluster]\nreplicas = 3\n"), "unknown field `replicas`"),
        (tmp.path().join("absent.toml"), "cannot read the file"),
    ];
    for (file, expected) in cases {
        let out = run(&["--role", "querier"], &file);
        assert_eq!(out.status.code(), Some(2), "{}: {out:?}", file.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{}: {stderr}", file.display());
    }
}

#[test]
fn an_unknown_role_is_a_usage_error_listing_the_roles() {
    let out = run(&["--role", "compactor"], &repo_root().join("deploy/cluster/local.toml"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for role in ["serve", "ingester", "distributor", "querier", "gateway"] {
        assert!(stderr.contains(role), "{stderr}");
    }
}
