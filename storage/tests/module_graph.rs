//! The storage crate's top-level modules import each other without cycles.
//!
//! Reads `storage/src`, takes every `crate::<module>` path (also inside `use crate::{…}`
//! groups) outside test code as an edge from the file's top-level module to `<module>`,
//! and fails naming the first cycle found. A cycle means two modules can only be
//! understood (and changed) together; the fix is to move the shared piece into a module
//! both depend on (as `labels_codec` is for `keys` and `wal`). The same scan checks that
//! the head stays in memory only: the store behind it is `persist`'s business.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn src_dir() -> std::path::PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
        .join("src")
}

/// Top-level module names: `foo.rs` and `foo/` under `src/`.
fn modules() -> BTreeSet<String> {
    std::fs::read_dir(src_dir())
        .expect("read src")
        .map(|e| e.expect("entry").file_name().to_string_lossy().trim_end_matches(".rs").to_string())
        .filter(|m| m != "lib")
        .collect()
}

/// `(top-level module, source text)` of every non-test file.
fn sources(dir: &Path, top: Option<&str>, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let module = top.map_or_else(|| name.trim_end_matches(".rs").to_string(), str::to_string);
        if path.is_dir() {
            sources(&path, Some(&module), out);
        } else if name.ends_with(".rs") && name != "tests.rs" && name != "format_tests.rs" && module != "lib" {
            let text = std::fs::read_to_string(&path).expect("read source");
            // Inline unit tests may import anything; they are not part of the graph.
            let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default().to_string();
            out.push((module, text));
        }
    }
}

/// Module names a source refers to through `crate::`.
fn references(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let items: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, D}`: the first segment of each top-level item.
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(i, _)| i);
            let mut items = Vec::new();
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            items.push(&group[start..end]);
            items
        } else {
            vec![rest]
        };
        for item in items {
            let ident: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if modules.contains(&ident) {
                out.insert(ident);
            }
        }
    }
    out
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == n) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let mut files = Vec::new();
    sources(&src_dir(), None, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in &files {
        let refs = references(text, &modules);
        graph.entry(module.clone()).or_default().extend(refs.into_iter().filter(|r| r != module));
    }
    graph
}

#[test]
fn storage_modules_import_each_other_without_cycles() {
    let graph = graph();
    assert!(graph.contains_key("engine") && graph["engine"].contains("wal"), "the scan found no edges: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle in storage: {}", cycle.join(" → "));
    }
}

#[test]
fn the_head_knows_nothing_of_rocksdb() {
    let graph = graph();
    let store = ["db", "keys", "persist", "read", "index", "wal", "engine"];
    let reached: Vec<&String> = graph["head"].iter().filter(|m| store.contains(&m.as_str())).collect();
    assert!(reached.is_empty(), "head imports store modules {reached:?}; persisting belongs in `persist`");
    let mut files = Vec::new();
    sources(&src_dir(), None, &mut files);
    for (module, text) in files.iter().filter(|(m, _)| m == "head") {
        assert!(!text.contains("rocksdb"), "{module} mentions rocksdb");
    }
    assert!(graph["persist"].contains("head"), "the scan did not see persist → head: {graph:?}");
}

#[test]
fn the_cycle_finder_reports_a_cycle() {
    let modules: BTreeSet<String> = ["types", "wal", "keys"].iter().map(|s| s.to_string()).collect();
    let mut graph = BTreeMap::new();
    graph.insert("types".to_string(), references("pub x: crate::wal::FsyncStats,", &modules));
    graph.insert("wal".to_string(), references("use crate::{keys, types::Label};", &modules));
    graph.insert("keys".to_string(), references("use crate::types::Label;", &modules));
    assert_eq!(find_cycle(&graph), Some(vec!["keys".into(), "types".into(), "wal".into(), "keys".into()]));
}
