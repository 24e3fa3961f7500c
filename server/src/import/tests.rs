//! `tessera import` end to end inside the crate: written data is where remote write
//! would put it, bad input changes nothing, the lock and shard count are respected.

use std::collections::BTreeMap;
use std::path::Path;

use tessera_model::{MatchOp, Matcher};
use tessera_storage::SeriesSamples;

use super::*;

fn now() -> i64 {
    now_ms() - 3_600_000
}

fn opts(dir: &Path, files: Vec<PathBuf>, batch: usize) -> ImportOptions {
    ImportOptions {
        data_dir: dir.to_path_buf(),
        shards: Some(2),
        tenant: "anonymous".into(),
        files,
        config: Config::default(),
        batch_samples: batch,
        cache_bytes: DEFAULT_CACHE_BYTES,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write input");
    p
}

fn select_all(dir: &Path, tenant: &str, name: &str) -> Vec<SeriesSamples> {
    let shards = Shards::open(dir, 2, &tessera_storage::EngineConfig::default(), 2, &|_, _| {}).expect("open");
    let m = Matcher::new("__name__", MatchOp::Equal, name).expect("matcher");
    shards.select(None, tenant, &[m], i64::MIN, i64::MAX, &tessera_storage::Interrupt::none()).expect("select")
}

/// Every file under `dir` with its size: "unchanged" means this is equal.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), e.metadata().map(|m| m.len()).unwrap_or(0));
        }
    }
    out
}

#[test]
fn imported_series_are_sorted_by_time_and_readable_through_the_tenant() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now();
    // Interleaved series, out of order within each, two spellings of one series.
    let mut text = String::new();
    for i in (0..50).rev() {
        text.push_str(&format!("cpu{{host=\"a\",mode=\"x\"}} {i} {}\n", t0 + i * 1000));
        text.push_str(&format!("cpu{{mode=\"y\",host=\"a\"}} {} {}\n", i * 2, t0 + i * 1000));
    }
    text.push_str(&format!("cpu{{mode=\"x\",host=\"a\"}} 50 {}\n", t0 + 50_000));
    let f = write(tmp.path(), "in.prom", &text);
    // Pass 2 from pass 1's memory, and parsing the file again: the same result.
    for cache_bytes in [DEFAULT_CACHE_BYTES, 0] {
        let data = tmp.path().join(format!("data-{cache_bytes}"));
        let mut o = opts(&data, vec![f.clone()], 7);
        o.tenant = "team-a".into();
        o.cache_bytes = cache_bytes;
        let s = run(&o).expect("import");
        assert_eq!((s.samples, s.series, s.min_t, s.max_t), (101, 2, t0, t0 + 50_000));

        let got = select_all(&data, "team-a", "cpu");
        assert_eq!(got.len(), 2);
        let x = got.iter().find(|s| s.labels.iter().any(|l| l.value == "x")).expect("series x");
        assert_eq!(x.samples.len(), 51, "cache_bytes {cache_bytes}");
        assert!(x.samples.windows(2).all(|w| w[0].t < w[1].t));
        assert_eq!(x.samples[50].v, 50.0);
        let y = got.iter().find(|s| s.labels.iter().any(|l| l.value == "y")).expect("series y");
        assert_eq!(y.samples.iter().map(|s| s.v).sum::<f64>(), (0..50).map(|i| f64::from(i * 2)).sum::<f64>());
        assert!(select_all(&data, "anonymous", "cpu").is_empty(), "other tenants see nothing");
    }
}

#[test]
fn openmetrics_file_is_read_in_seconds() {
    let tmp = tempfile::tempdir().expect("tmp");
    let secs = now() / 1000;
    let text = format!("# TYPE up gauge\nup{{job=\"j\"}} 1 {secs}.250\n# EOF\n");
    let f = write(tmp.path(), "in.om", &text);
    assert_eq!(detect_format(&f).expect("detect"), Format::OpenMetrics);
    let data = tmp.path().join("data");
    run(&opts(&data, vec![f], 100)).expect("import");
    let got = select_all(&data, "anonymous", "up");
    assert_eq!(got[0].samples[0].t, secs * 1000 + 250);
}

#[test]
fn a_bad_line_in_the_middle_leaves_the_data_directory_as_it_was() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now();
    let data = tmp.path().join("data");
    let good = write(tmp.path(), "good.prom", &format!("m{{a=\"1\"}} 1 {t0}\n"));
    run(&opts(&data, vec![good.clone()], 100)).expect("first import");
    let before = snapshot(&data);

    let mut text = String::new();
    for i in 0..100 {
        text.push_str(&format!("m{{a=\"2\"}} {i} {}\n", t0 + i));
    }
    text.push_str("m{a=\"2\" oops\n");
    text.push_str(&format!("m{{__tenant__=\"x\"}} 1 {t0}\n"));
    for i in 100..200 {
        text.push_str(&format!("m{{a=\"2\"}} {i} {}\n", t0 + i));
    }
    let bad = write(tmp.path(), "bad.prom", &text);
    let e = run(&opts(&data, vec![good, bad.clone()], 10)).expect_err("bad lines").to_string();
    assert!(e.contains(&format!("{}:101: ", bad.display())), "{e}");
    assert!(e.contains(&format!("{}:102: ", bad.display())), "{e}");
    assert!(e.contains("2 bad line(s); nothing was imported"), "{e}");
    assert_eq!(snapshot(&data), before, "data directory changed");

    let fresh = tmp.path().join("fresh");
    run(&opts(&fresh, vec![bad], 10)).expect_err("bad lines");
    assert!(!fresh.exists(), "a failed import into a new directory must not create it");
}

#[test]
fn validation_predicts_what_storage_would_refuse() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now();
    let future = now_ms() + 3_600_000;
    let cases = [
        (format!("m 1 {t0}\nm 2 {t0}\n"), "a second, different value"),
        (format!("m 1 {future}\n"), "in the future"),
        (format!("m 1 {}\nm 1 {}\nm 1 {}\n", t0 + 3_600_000, t0 + 3_600_001, t0), "out-of-order window"),
        (format!("m{{a=\"1\",a=\"2\"}} 1 {t0}\n"), "duplicate label name"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = write(tmp.path(), &format!("c{i}.prom"), text);
        let e = run(&opts(&tmp.path().join(format!("d{i}")), vec![f], 2)).expect_err(want).to_string();
        assert!(e.contains(want), "case {i}: {e}");
    }
    // The same disorder within one batch is sorted, not refused.
    let f = write(tmp.path(), "ok.prom", &cases[2].0);
    run(&opts(&tmp.path().join("ok"), vec![f], 100)).expect("one batch sorts");
}

#[test]
fn the_recorded_shard_count_and_a_running_server_s_lock_are_respected() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now();
    let f = write(tmp.path(), "in.prom", &format!("m 1 {t0}\n"));
    let data = tmp.path().join("data");
    run(&opts(&data, vec![f.clone()], 100)).expect("import");

    let mut o = opts(&data, vec![f.clone()], 100);
    o.shards = Some(3);
    let e = run(&o).expect_err("shard mismatch").to_string();
    assert!(e.contains("created with 2 shards"), "{e}");
    o.shards = None;
    run(&o).expect("the recorded count is the default");

    let held = Shards::open(&data, 2, &tessera_storage::EngineConfig::default(), 2, &|_, _| {}).expect("open");
    let e = format!("{:#}", run(&opts(&data, vec![f], 100)).expect_err("locked"));
    assert!(e.contains("is in use by another process"), "{e}");
    drop(held);
}

#[test]
fn an_invalid_tenant_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let f = write(tmp.path(), "in.prom", "m 1 1\n");
    let mut o = opts(&tmp.path().join("d"), vec![f], 10);
    o.tenant = "a|b".into();
    let e = run(&o).expect_err("tenant").to_string();
    assert!(e.contains("--tenant"), "{e}");
}

#[test]
fn files_larger_than_a_parsing_block_keep_every_sample_and_exact_line_numbers() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now() - 1_000_000;
    let pad = "p".repeat(80);
    let mut lines = Vec::new();
    for i in 0..1000i64 {
        for g in 0..40 {
            lines.push(format!("big{{g=\"{g}\",pad=\"{pad}\"}} {i} {}", t0 + i * 1000));
        }
    }
    let text = lines.join("\n");
    assert!(text.len() > BLOCK_BYTES, "the input must span several blocks");
    let f = write(tmp.path(), "big.prom", &text);
    let s = run(&opts(&tmp.path().join("ok"), vec![f], DEFAULT_BATCH_SAMPLES)).expect("import");
    assert_eq!((s.samples, s.series), (40_000, 40));

    lines[38_999] = "big{g=\"1\" 1 1".into();
    let f = write(tmp.path(), "bad.prom", &(lines.join("\n") + "\n"));
    let e = run(&opts(&tmp.path().join("bad"), vec![f.clone()], DEFAULT_BATCH_SAMPLES)).expect_err("bad").to_string();
    assert!(e.contains(&format!("{}:39000: label set has no closing", f.display())), "{e}");
    assert!(e.starts_with("1 bad line(s)"), "{e}");
}

#[test]
fn content_after_eof_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let secs = now() / 1000;
    let f = write(tmp.path(), "x.om", &format!("up 1 {secs}\n# EOF\nup 2 {}\n# EOF\n", secs + 1));
    let e = run(&opts(&tmp.path().join("d"), vec![f.clone()], 10)).expect_err("after EOF").to_string();
    assert!(e.contains(&format!("{}:3: content after `# EOF`", f.display())), "{e}");
}

#[test]
fn series_first_seen_in_later_blocks_keep_every_sample_in_order() {
    // Half the series appear only after the first blocks, one of them in a second
    // spelling (labels reordered) there: the parsing workers see them as new while the
    // checks extend the index, block after block.
    let tmp = tempfile::tempdir().expect("tmp");
    let t0 = now() - 1_000_000;
    let pad = "p".repeat(300);
    let mut text = String::new();
    for i in 0..1000i64 {
        for g in 0..40 {
            if g >= 20 && i < 600 {
                continue;
            }
            let t = t0 + i * 1000;
            if g == 39 && i % 2 == 1 {
                text.push_str(&format!("late{{pad=\"{pad}\",g=\"{g}\"}} {}.5 {t}\n", i * 100 + g));
            } else {
                text.push_str(&format!("late{{g=\"{g}\",pad=\"{pad}\"}} {}.5 {t}\n", i * 100 + g));
            }
        }
    }
    assert!(text.len() > 2 * BLOCK_BYTES, "the input must span several blocks");
    let f = write(tmp.path(), "late.prom", &text);
    let dir = tmp.path().join("d");
    let s = run(&opts(&dir, vec![f], DEFAULT_BATCH_SAMPLES)).expect("import");
    assert_eq!((s.samples, s.series), (20 * 1000 + 20 * 400, 40));
    let got = select_all(&dir, "anonymous", "late");
    assert_eq!(got.len(), 40);
    for series in got {
        let g: i64 = series.labels.get("g").expect("g").parse().expect("number");
        let first = if g >= 20 { 600 } else { 0 };
        let want: Vec<(i64, f64)> = (first..1000).map(|i| (t0 + i * 1000, (i * 100 + g) as f64 + 0.5)).collect();
        let have: Vec<(i64, f64)> = series.samples.iter().map(|x| (x.t, x.v)).collect();
        assert_eq!(have, want, "series g={g}");
    }
}
