//! Runs Prometheus' conformance scripts (`testdata/upstream`) and our own scripts
//! (`testdata/*.test`) through the promqltest runner.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tessera_query::promqltest::{run_files, Failure};

fn scripts_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("testdata directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    v.sort();
    v
}

/// Why a listed eval fails, in words a reader of EXPECTED_FAILURES can act on.
fn category(f: &Failure) -> &'static str {
    let file = Path::new(&f.file).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let r = f.reason.as_str();
    if file == "native_histograms.test" {
        return "native histograms are not evaluated";
    }
    if r.contains("parse error") {
        return match file.as_str() {
            "duration_expression.test" => "promql-parser 0.11 gap: duration arithmetic",
            "extended_vectors.test" => "promql-parser 0.11 gap: anchored/smoothed modifiers",
            _ => "promql-parser 0.11 gap",
        };
    }
    // The other files mix native histograms into float data sets (e.g. a `version`
    // series with one histogram sample), so these failures are histogram ones too.
    if r.contains("native histogram") || f.query.contains("histogram") || f.query.contains("count_values") {
        return "native histograms are not evaluated";
    }
    match file.as_str() {
        "info.test" => "experimental info() enrichment not implemented",
        "type_and_unit.test" => "experimental __type__/__unit__ labels not implemented",
        "start_timestamps.test" => "experimental start timestamps (@st) not implemented",
        _ => "engine difference",
    }
}

fn key(f: &Failure) -> String {
    let file = Path::new(&f.file).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{file}:{}", f.line)
}

#[test]
fn upstream_scripts_have_no_unexpected_failures() {
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("testdata/upstream");
    let expected_path = dir.join("EXPECTED_FAILURES");
    let summary = run_files(&scripts_in(&dir));
    for f in &summary.files {
        eprintln!("{}: {} passed, {} failed", f.file, f.passed, f.failed);
    }
    let failures: Vec<&Failure> = summary.files.iter().flat_map(|f| f.failures.iter()).collect();
    if std::env::var_os("PROMQLTEST_WRITE_EXPECTED").is_some() {
        let mut text = String::from(
            "# Evals of testdata/upstream expected to fail: file:line<TAB>query<TAB>reason.\n\
             # Regenerate with PROMQLTEST_WRITE_EXPECTED=1 cargo test --workspace --test promqltest\n",
        );
        for f in &failures {
            let reason: String = f.reason.chars().take(200).collect::<String>().replace(['\n', '\t'], " ");
            text.push_str(&format!("{}\t{}\t{}: {}\n", key(f), f.query, category(f), reason));
        }
        std::fs::write(&expected_path, text).expect("write EXPECTED_FAILURES");
        return;
    }
    let listed: BTreeMap<String, String> = std::fs::read_to_string(&expected_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string())
        })
        .collect();
    let failing: BTreeMap<String, &Failure> = failures.iter().map(|f| (key(f), *f)).collect();
    for (k, q) in &listed {
        if !failing.contains_key(k) {
            eprintln!("now passing (remove from EXPECTED_FAILURES): {k} {q}");
        }
    }
    let regressions: Vec<String> = failing
        .iter()
        .filter(|(k, _)| !listed.contains_key(*k))
        .map(|(k, f)| format!("{k}: {}: {}", f.query, f.reason))
        .collect();
    assert!(regressions.is_empty(), "{} unexpected failures:\n{}", regressions.len(), regressions.join("\n"));
}

#[test]
fn own_scripts_all_pass() {
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("testdata");
    let summary = run_files(&scripts_in(&dir));
    let msgs: Vec<String> = summary
        .files
        .iter()
        .flat_map(|f| f.failures.iter())
        .map(|f| format!("{}:{}: {}: {}", f.file, f.line, f.query, f.reason))
        .collect();
    assert!(summary.passed > 0, "no evals ran");
    assert!(msgs.is_empty(), "{}", msgs.join("\n"));
}
