use super::*;

#[test]
fn example_config_in_deploy_parses_and_validates() {
    let path =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("../deploy/tessera.toml");
    let cfg = Config::from_file(&path).expect("deploy/tessera.toml parses");
    cfg.validate().expect("deploy/tessera.toml is valid");
    assert!(cfg.limits.max_labels_per_series >= 40);
}

#[test]
fn empty_file_gives_documented_defaults() {
    let cfg = Config::from_toml("").expect("empty config parses");
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:9201");
    assert_eq!(cfg.data_dir, PathBuf::from("./tessera-data"));
    assert_eq!(cfg.shards, 0, "automatic: recorded, else 2 per core in 4..=16");
    assert_eq!(cfg.limits.max_labels_per_series, 64);
    cfg.validate().expect("defaults are valid");
}

#[test]
fn unknown_key_is_rejected() {
    let err = Config::from_toml("shard = 3").expect_err("typo must fail");
    assert!(err.to_string().contains("shard"), "{err}");
}

#[test]
fn shard_count_zero_is_automatic_and_too_many_is_invalid() {
    Config::from_toml("shards = 0").expect("parses").validate().expect("0 = automatic is valid");
    let err = Config::from_toml("shards = 5000").expect("parses").validate().expect_err("over 4096");
    assert!(err.to_string().contains("shards must be in 1..=4096"), "{err}");
}

/// A configured count wins; 0 keeps the count a directory recorded (a directory moved to
/// a machine with more cores still opens), and only a new directory gets the machine's.
#[test]
fn automatic_shard_count_keeps_the_recorded_one() {
    assert_eq!(resolve_shards(7, Some(16)), 7, "a mismatch is then refused by the recorded check");
    assert_eq!(resolve_shards(0, Some(16)), 16);
    assert_eq!(resolve_shards(0, Some(3)), 3);
    let auto = resolve_shards(0, None);
    assert_eq!(auto, automatic_shards());
    assert!(AUTOMATIC_SHARDS.contains(&auto), "{auto}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    assert_eq!(auto, (2 * cores).clamp(4, 16));
}

/// `deploy/cluster/local.toml` parses, its `[cluster]` table validates, and RF = 3 on
/// three ingesters puts every shard on every ingester.
#[test]
fn example_cluster_config_parses_and_places_every_shard_on_three_ingesters() {
    let path = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"),
    )
    .join("../deploy/cluster/local.toml");
    let cfg = Config::from_file(&path).expect("deploy/cluster/local.toml parses");
    cfg.cluster.validate().expect("valid [cluster]");
    assert_eq!(cfg.cluster.write_quorum(), 2);
    let p = cfg.cluster.placement().expect("placement");
    assert_eq!(p.load(), vec![16, 16, 16]);
}

#[test]
fn cluster_table_errors_name_the_key_to_fix() {
    let cases = [
        ("[cluster]\n", "no ingesters"),
        ("[cluster]\nreplication_factor = 2\nwrite_quorum = 3\ningesters = [{ id = \"a\", addr = \"h:1\" }, { id = \"b\", addr = \"h:2\" }]\n", "cluster.write_quorum"),
        ("[cluster]\ningester_count = 3\n", "cluster.ingester_addr_template"),
        ("[cluster]\nplacement = \"ring\"\ningester_count = 3\ningester_addr_template = \"i-{i}:9095\"\n", "cluster.placement"),
        ("[cluster]\nreplication_factor = 1\ningesters = [{ id = \"a\", addr = \"nohost\" }]\n", "not host:port"),
    ];
    for (toml, want) in cases {
        let cfg = Config::from_toml(toml).expect("parses");
        let err = cfg.cluster.validate().expect_err(toml);
        assert!(err.contains(want), "{toml:?}: {err}");
    }
}

/// `limits.max_sample_age_secs = 0` means "the retention"; both 0 means no bound.
#[test]
fn sample_age_bound_defaults_to_the_retention() {
    let cfg = Config::from_toml("").expect("parses");
    assert_eq!(cfg.max_sample_age_ms(), Some(cfg.storage.retention_ms));
    let cfg = Config::from_toml("[limits]\nmax_sample_age_secs = 60\n").expect("parses");
    assert_eq!(cfg.max_sample_age_ms(), Some(60_000));
    let cfg = Config::from_toml("[storage]\nretention_ms = 0\n").expect("parses");
    assert_eq!(cfg.max_sample_age_ms(), None);
}

#[test]
fn request_bounds_must_be_positive() {
    for key in ["max_decoded_bytes_per_request", "max_read_queries_per_request", "max_concurrent_reads"] {
        let cfg = Config::from_toml(&format!("[limits]\n{key} = 0\n")).expect("parses");
        let err = cfg.validate().expect_err("0 is invalid");
        assert!(err.to_string().contains(key), "{err}");
    }
}
