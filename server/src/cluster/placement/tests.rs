use super::*;

fn members(n: usize) -> Vec<Member> {
    (0..n).map(|i| Member { id: format!("tessera-ingester-{i}"), zone: String::new() }).collect()
}

/// The table is a persisted contract (data lives where it says): any change to the
/// algorithm or the hash shows up here. Regenerate only with a new algorithm name:
/// `TESSERA_UPDATE_GOLDEN=1 cargo test --workspace -- placement_table_is_frozen`.
#[test]
fn placement_table_is_frozen() {
    let path = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"),
    )
    .join("src/cluster/placement/golden-s16-rf3-n5.txt");
    let table = Placement::compute(16, 3, &members(5)).expect("placement").render();
    if std::env::var_os("TESSERA_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &table).expect("write golden");
    }
    let golden = std::fs::read_to_string(&path).expect("golden file");
    assert_eq!(table, golden, "placement {ALGORITHM} changed");
}

#[test]
fn every_shard_gets_rf_distinct_ingesters() {
    for n in 1..=12 {
        for rf in 1..=n.min(5) as u32 {
            let p = Placement::compute(64, rf, &members(n)).expect("placement");
            for (s, r) in p.replicas.iter().enumerate() {
                assert_eq!(r.len(), rf as usize, "shard {s}, n {n}, rf {rf}");
                let mut d = r.clone();
                d.sort();
                d.dedup();
                assert_eq!(d.len(), r.len(), "shard {s} has a repeated ingester (n {n}, rf {rf})");
            }
        }
    }
}

#[test]
fn load_is_bounded_by_the_cap() {
    for (s, n) in [(16, 3), (16, 5), (64, 5), (64, 10), (64, 30), (256, 10), (256, 7)] {
        let p = Placement::compute(s, 3, &members(n)).expect("placement");
        let load = p.load();
        let (floor, ceil) = (s as usize * 3 / n, (s as usize * 3).div_ceil(n));
        let (max, min) = (*load.iter().max().expect("n > 0"), *load.iter().min().expect("n > 0"));
        eprintln!("S {s} N {n}: max {max} min {min} (floor {floor}, ceil {ceil})");
        assert!(max <= ceil, "S {s} N {n}: max {max} over ceil(S·RF/N) = {ceil}");
        assert!(min + 1 >= floor, "S {s} N {n}: min {min} more than one under floor(S·RF/N) = {floor}");
    }
}

#[test]
fn adding_an_ingester_moves_little_more_than_the_ideal() {
    for (s, n) in [(64, 3), (64, 5), (64, 10), (256, 10)] {
        let before = Placement::compute(s, 3, &members(n)).expect("placement");
        let after = Placement::compute(s, 3, &members(n + 1)).expect("placement");
        let moved = before.moved_to(&after);
        let ideal = (s as f64 * 3.0) / (n as f64 + 1.0);
        eprintln!("S {s} N {n}→{}: moved {moved}, ideal {ideal:.1}", n + 1);
        assert!(moved as f64 <= ideal * 1.6, "S {s} N {n}→{}: moved {moved}, ideal {ideal:.1}", n + 1);
    }
}

#[test]
fn zones_get_distinct_replicas_when_there_are_enough() {
    let ms: Vec<Member> = (0..6).map(|i| Member { id: format!("ing-{i}"), zone: format!("zone-{}", i % 3) }).collect();
    let p = Placement::compute(32, 3, &ms).expect("placement");
    for r in &p.replicas {
        let mut zones: Vec<&str> = r.iter().map(|&i| ms[i].zone.as_str()).collect();
        zones.sort();
        zones.dedup();
        assert_eq!(zones.len(), 3, "replicas {r:?} share a zone");
    }
}

#[test]
fn replication_factor_one_works() {
    let p = Placement::compute(8, 1, &members(1)).expect("placement");
    assert!(p.replicas.iter().all(|r| r == &vec![0]));
}

#[test]
fn bad_memberships_are_refused_with_the_reason() {
    assert_eq!(Placement::compute(8, 3, &members(2)), Err(PlacementError::TooFewIngesters { rf: 3, n: 2 }));
    let mut ms = members(3);
    ms[2].id = ms[0].id.clone();
    assert_eq!(Placement::compute(8, 3, &ms), Err(PlacementError::DuplicateId("tessera-ingester-0".into())));
}

#[test]
fn the_same_input_gives_the_same_table() {
    let a = Placement::compute(64, 3, &members(7)).expect("placement");
    let mut shuffled = members(7);
    shuffled.reverse();
    let b = Placement::compute(64, 3, &shuffled).expect("placement");
    // Member order does not matter, only ids: compare by id.
    for s in 0..64 {
        let ids = |p: &Placement| {
            let mut v: Vec<String> = p.replicas[s].iter().map(|&i| p.members[i].id.clone()).collect();
            v.sort();
            v
        };
        assert_eq!(ids(&a), ids(&b), "shard {s}");
    }
}
