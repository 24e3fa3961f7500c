//! The whole promqltest corpus (Prometheus' scripts and ours) with the data split over
//! 1, 2, 3 and 7 shards: every eval must give the unsplit engine's answer (values within
//! `SPLIT_REL_TOLERANCE`, the same annotations and errors), with the planner's fragments
//! evaluated per shard on two threads; and unsplit with the series-at-a-time path on, the
//! materialising engine's answer exactly.

use std::path::{Path, PathBuf};

use tessera_query::promqltest::compare_split;

fn scripts() -> Vec<PathBuf> {
    let root =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("testdata");
    let mut v = Vec::new();
    for dir in [root.join("upstream"), root] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("testdata directory exists")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "test"))
            .collect();
        files.sort();
        v.extend(files);
    }
    v
}

fn check(shards: usize) {
    let mut compared = 0;
    let mut fragments = 0;
    let (mut streamed_unsplit, mut streamed_split) = (0, 0);
    let mut diffs = Vec::new();
    for path in scripts() {
        let text = std::fs::read_to_string(&path).expect("script is readable");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let s = compare_split(&name, &text, shards, 2);
        compared += s.file.passed + s.file.failed;
        fragments += s.fragments;
        streamed_unsplit += s.streamed_unsplit;
        streamed_split += s.streamed_split;
        diffs.extend(s.file.failures.iter().map(|f| format!("{}:{}: {}: {}", f.file, f.line, f.query, f.reason)));
    }
    assert!(compared > 2000, "only {compared} evals compared");
    // Most evals push something down: the split path really ran.
    assert!(fragments as usize > compared * shards / 2, "{fragments} fragments for {compared} evals");
    // Most evals are dashboard shapes: the series-at-a-time path really ran, unsplit and
    // inside the shards' fragments.
    eprintln!("{compared} evals, {streamed_unsplit} streamed selects unsplit, {streamed_split} in fragments");
    assert!(streamed_unsplit as usize > compared / 2, "{streamed_unsplit} streamed selects for {compared} evals");
    assert!(streamed_split as usize > compared * shards / 2, "{streamed_split} streamed selects in fragments");
    assert!(diffs.is_empty(), "{} evals differ:\n{}", diffs.len(), diffs.join("\n"));
}

#[test]
fn the_corpus_split_over_one_shard_answers_as_unsplit() {
    check(1);
}

#[test]
fn the_corpus_split_over_two_shards_answers_as_unsplit() {
    check(2);
}

#[test]
fn the_corpus_split_over_three_shards_answers_as_unsplit() {
    check(3);
}

#[test]
fn the_corpus_split_over_seven_shards_answers_as_unsplit() {
    check(7);
}
