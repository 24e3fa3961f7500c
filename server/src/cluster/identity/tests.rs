use super::*;
use crate::cluster::IngesterEntry;

fn cfg(ids: &[&str]) -> ClusterConfig {
    ClusterConfig {
        shards: 8,
        replication_factor: 2,
        ingesters: ids
            .iter()
            .enumerate()
            .map(|(i, id)| IngesterEntry {
                id: (*id).into(),
                addr: format!("127.0.0.1:{}", 9300 + i),
                zone: String::new(),
            })
            .collect(),
        ..ClusterConfig::default()
    }
}

#[test]
fn epoch_changes_with_membership_rf_and_shards_but_not_with_addresses() {
    let base = Identity::of(&cfg(&["a", "b", "c"]));
    assert_eq!(base, Identity::of(&cfg(&["a", "b", "c"])));
    assert_ne!(base.epoch, Identity::of(&cfg(&["a", "b", "d"])).epoch);
    assert_ne!(base.epoch, Identity::of(&cfg(&["a", "b", "c", "d"])).epoch);
    let mut rf = cfg(&["a", "b", "c"]);
    rf.replication_factor = 3;
    assert_ne!(base.epoch, Identity::of(&rf).epoch);
    let mut moved = cfg(&["a", "b", "c"]);
    moved.ingesters[0].addr = "10.0.0.9:9095".into();
    assert_eq!(base, Identity::of(&moved));
}

#[test]
fn mismatch_names_both_values_of_every_differing_field() {
    let mine = Identity::of(&cfg(&["a", "b"]));
    assert_eq!(mine.mismatch(&mine.clone(), "ingester \"a\""), None);
    let mut other_cfg = cfg(&["a", "b"]);
    other_cfg.shards = 16;
    other_cfg.name = "prod".into();
    let theirs = Identity::of(&other_cfg);
    let msg = mine.mismatch(&theirs, "ingester \"a\"").expect("differs");
    assert!(msg.contains("cluster name: request \"prod\", ingester \"a\" \"tessera\""), "{msg}");
    assert!(msg.contains("shard count: request 16, ingester \"a\" 8"), "{msg}");
    assert!(msg.contains("placement epoch"), "{msg}");
}

#[test]
fn data_dir_records_identity_and_refuses_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Identity::of(&cfg(&["a", "b"]));
    check_data_dir(dir.path(), &id, "a").expect("first start records");
    check_data_dir(dir.path(), &id, "a").expect("same identity starts");
    // A membership change (another epoch) is allowed.
    check_data_dir(dir.path(), &Identity::of(&cfg(&["a", "b", "c"])), "a").expect("epoch is not recorded");
    let err = check_data_dir(dir.path(), &id, "b").expect_err("another ingester id").to_string();
    assert!(err.contains("ingester id: recorded \"a\", given \"b\""), "{err}");
    let mut other = cfg(&["a", "b"]);
    other.name = "prod".into();
    let err = check_data_dir(dir.path(), &Identity::of(&other), "a").expect_err("another name").to_string();
    assert!(err.contains("cluster.name: recorded \"tessera\", configured \"prod\""), "{err}");
}
