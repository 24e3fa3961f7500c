use super::*;

#[test]
fn example_config_in_deploy_parses_and_validates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/tessera.toml");
    let cfg = Config::from_file(&path).expect("deploy/tessera.toml parses");
    cfg.validate().expect("deploy/tessera.toml is valid");
    assert!(cfg.limits.max_labels_per_series >= 40);
}

#[test]
fn empty_file_gives_documented_defaults() {
    let cfg = Config::from_toml("").expect("empty config parses");
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:9201");
    assert_eq!(cfg.data_dir, PathBuf::from("./tessera-data"));
    assert_eq!(cfg.shards, 16);
    assert_eq!(cfg.limits.max_labels_per_series, 64);
    cfg.validate().expect("defaults are valid");
}

#[test]
fn unknown_key_is_rejected() {
    let err = Config::from_toml("shard = 3").expect_err("typo must fail");
    assert!(err.to_string().contains("shard"), "{err}");
}

#[test]
fn zero_shards_is_invalid() {
    let cfg = Config::from_toml("shards = 0").expect("parses");
    assert!(cfg.validate().is_err());
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
