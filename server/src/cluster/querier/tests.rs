use super::*;
use tessera_model::Sample;

fn s(t: i64, v: f64) -> Sample {
    Sample { t, v }
}

#[test]
fn replicas_merge_into_one_sample_per_timestamp_in_time_order() {
    // Replica 0 missed t=2 (it was down); replica 1 missed t=4.
    let a = vec![s(1, 1.0), s(3, 3.0), s(4, 4.0)];
    let b = vec![s(1, 1.0), s(2, 2.0), s(3, 3.0)];
    assert_eq!(merge_samples(vec![a, b]), vec![s(1, 1.0), s(2, 2.0), s(3, 3.0), s(4, 4.0)]);
}

#[test]
fn on_conflicting_values_the_first_replica_in_config_order_wins() {
    let a = vec![s(1, 10.0)];
    let b = vec![s(1, 20.0), s(2, 2.0)];
    assert_eq!(merge_samples(vec![a.clone(), b.clone()]), vec![s(1, 10.0), s(2, 2.0)]);
    assert_eq!(merge_samples(vec![b, a]), vec![s(1, 20.0), s(2, 2.0)]);
}
