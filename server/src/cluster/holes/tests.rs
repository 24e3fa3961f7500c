use super::*;

#[test]
fn holes_merge_when_they_overlap_or_touch_and_stay_sorted() {
    let mut hs = Vec::new();
    insert(&mut hs, Hole { from: 50, to: 60 });
    insert(&mut hs, Hole { from: 10, to: 20 });
    insert(&mut hs, Hole { from: 21, to: 30 });
    assert_eq!(hs, vec![Hole { from: 10, to: 30 }, Hole { from: 50, to: 60 }]);
    insert(&mut hs, Hole { from: 25, to: 55 });
    assert_eq!(hs, vec![Hole { from: 10, to: 60 }]);
    insert(&mut hs, Hole { from: 100, to: i64::MAX });
    insert(&mut hs, Hole { from: 200, to: i64::MAX });
    assert_eq!(hs, vec![Hole { from: 10, to: 60 }, Hole { from: 100, to: i64::MAX }]);
}

#[test]
fn the_holes_header_round_trips_and_malformed_items_are_refused() {
    let hs = vec![
        ShardHole { shard: 3, hole: Hole { from: -5, to: i64::MAX } },
        ShardHole { shard: 7, hole: Hole { from: i64::MIN, to: 10 } },
    ];
    assert_eq!(parse_header(&encode_header(&hs)), Ok(hs));
    assert_eq!(parse_header(""), Ok(Vec::new()));
    for bad in ["3:1", "x:1:2", "3:5:4", "3:1:2,"] {
        assert!(parse_header(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_state_file_round_trips_holes_and_newest_samples() {
    let text = "# comment\nnewest 2 5000\nhole 2 100 200\nhole 2 150 300\nhole 4 -10 9223372036854775807\n";
    let rec = parse_state(text).expect("parse");
    assert_eq!(rec[&ShardId(2)], Recorded { newest: Some(5000), holes: vec![Hole { from: 100, to: 300 }] });
    assert_eq!(rec[&ShardId(4)].holes, vec![Hole { from: -10, to: i64::MAX }]);
    for bad in ["hole 1 5 4", "hole 1 5", "gap 1 2 3", "newest x 5"] {
        assert!(parse_state(bad).is_err(), "{bad}");
    }
}

fn open_shards(dir: &Path, ids: &[ShardId]) -> Shards {
    Shards::open_ids(dir, 4, ids, &tessera_storage::EngineConfig::default(), 2, &|_, _| {}).expect("open")
}

#[tokio::test]
async fn a_first_start_has_no_hole_and_a_restart_has_one_from_the_newest_sample_minus_the_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = [ShardId(0), ShardId(1), ShardId(2), ShardId(3)];
    let shards = open_shards(dir.path(), &ids);
    let book = HoleBook::open(dir.path(), &ids, &shards, 600_000, true).expect("open book");
    assert_eq!(book.pending_count(), 0, "first start: nothing was missed");
    assert!(!book.refuses_writes(ShardId(0)));

    // A sample at t = 10_000_000 lands in some shard.
    let labels = vec![tessera_model::Label::new("__name__", "m")];
    let hash = crate::shards::series_hash("t", &labels);
    let shard = ShardId::of(hash, 4);
    let s = crate::shards::PushSeries { labels, samples: vec![tessera_model::Sample::new(10_000_000, 1.0)], hash };
    shards.push("t", vec![s]).await.expect("push");
    book.save(&shards).expect("save");
    drop(shards);

    // The restart: every shard has a hole and refuses writes; the one with data starts
    // its hole at the newest sample minus the window.
    let shards = open_shards(dir.path(), &ids);
    let book = HoleBook::open(dir.path(), &ids, &shards, 600_000, true).expect("reopen book");
    assert_eq!(book.pending_count(), 4);
    assert!(book.refuses_writes(shard));
    assert_eq!(book.holes(shard), vec![Hole { from: 10_000_000 - 600_000, to: i64::MAX }]);
    let other = ids.iter().copied().find(|&i| i != shard).expect("another shard");
    assert_eq!(book.holes(other), vec![Hole { from: i64::MIN, to: i64::MAX }], "an empty shard missed everything");
    assert_eq!(book.overlapping(shard, 0, 9_000_000), Vec::<Hole>::new());
    assert_eq!(book.all_overlapping(9_500_000, 9_500_000).len(), 4);

    // Cleared holes stay cleared across a restart only if no new restart happened:
    // clearing then saving leaves just the next restart's hole.
    let snapshot = book.holes(shard);
    book.accept_writes(shard);
    book.clear(shard, &snapshot);
    assert!(book.holes(shard).is_empty());
    assert!(!book.refuses_writes(shard));
    book.save(&shards).expect("save");
    let text = std::fs::read_to_string(dir.path().join(STATE_FILE)).expect("state file");
    assert!(text.contains(&format!("newest {} 10000000", shard.0)), "{text}");
    assert!(!text.contains(&format!("hole {} ", shard.0)), "{text}");
}
