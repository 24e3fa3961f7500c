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

fn hole(shard: u32, from: i64, to: i64) -> ShardHole {
    ShardHole { shard, hole: holes::Hole { from, to } }
}

#[test]
fn a_replica_with_a_hole_overlapping_the_read_does_not_count_towards_the_quorum() {
    // Shard 3 on ingesters 0, 1, 2; all answered. Ingester 0 came back after a restart
    // and may be missing shard 3 from t=1000 on (still repairing).
    let replicas = [0, 1, 2];
    let answered = [true, true, true];
    let holes = vec![vec![hole(3, 1000, i64::MAX)], vec![], vec![]];
    assert_eq!(complete_replicas(&replicas, &answered, &holes, 3, (500, 2000)), 2, "read overlaps the hole");
    assert_eq!(complete_replicas(&replicas, &answered, &holes, 3, (0, 999)), 3, "read ends before the hole");
    assert_eq!(complete_replicas(&replicas, &answered, &holes, 3, (1000, 1000)), 2, "ends are inclusive");
    assert_eq!(complete_replicas(&replicas, &answered, &holes, 4, (500, 2000)), 3, "a hole of another shard");

    // With ingesters 1 and 2 down, the one with the hole alone is not a quorum of R = 2,
    // and not even of R = 1: a read of the range it missed can never be answered by it
    // alone.
    let answered = [true, false, false];
    assert_eq!(complete_replicas(&replicas, &answered, &holes, 3, (500, 2000)), 0);
    // Once repaired (no hole), it counts again.
    let repaired = vec![vec![], vec![], vec![]];
    assert_eq!(complete_replicas(&replicas, &answered, &repaired, 3, (500, 2000)), 1);
    // A replica that did not answer never counts, hole or not.
    assert_eq!(complete_replicas(&replicas, &[false, false, false], &repaired, 3, (500, 2000)), 0);
}
