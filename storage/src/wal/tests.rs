use super::record::{self, SampleEntry};
use super::*;
use crate::config::WalFsync;

fn payload(i: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let s = [SampleEntry { id: i as u32, t: i as i64 * 1000, v: i as f64 }];
    record::encode_batch(&[], &s, &mut out);
    out
}

fn read_all(dir: &Path) -> (Vec<Vec<u8>>, Option<TornTail>) {
    let mut got = Vec::new();
    let torn = replay(dir, |_, _, p| {
        got.push(p.to_vec());
        Ok(())
    })
    .expect("replay");
    (got, torn)
}

#[test]
fn records_survive_reopen_across_segments() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(d.path(), WalFsync::Always, 1000, 1 << 20).expect("create");
    for i in 0..10 {
        let pos = wal.write(record::TYPE_BATCH, &payload(i)).expect("write");
        wal.sync_to(pos).expect("sync");
        if i == 4 {
            wal.rotate().expect("rotate");
        }
    }
    drop(wal);
    let (got, torn) = read_all(d.path());
    assert!(torn.is_none());
    assert_eq!(got, (0..10).map(payload).collect::<Vec<_>>());
}

#[test]
fn torn_tail_is_cut_at_last_good_record_and_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(d.path(), WalFsync::None, 1000, 1 << 20).expect("create");
    for i in 0..3 {
        wal.write(record::TYPE_BATCH, &payload(i)).expect("write");
    }
    drop(wal);
    let seg = segment_path(d.path(), 1);
    let full = fs::read(&seg).expect("read");
    let good_len = full.len();
    // Append half a record, as a crash mid-write would leave.
    let extra = record::frame(record::TYPE_BATCH, &payload(9));
    let mut torn = full.clone();
    torn.extend_from_slice(&extra[..extra.len() / 2]);
    fs::write(&seg, &torn).expect("write");
    let (got, t) = read_all(d.path());
    assert_eq!(got.len(), 3);
    let t = t.expect("torn tail reported");
    assert_eq!((t.segment, t.offset), (1, good_len as u64));
    assert_eq!(fs::metadata(&seg).expect("stat").len(), good_len as u64);
    // A second replay is clean.
    assert!(read_all(d.path()).1.is_none());
}

#[test]
fn corrupt_middle_record_drops_it_and_everything_after() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(d.path(), WalFsync::None, 1000, 1 << 20).expect("create");
    for i in 0..4 {
        wal.write(record::TYPE_BATCH, &payload(i)).expect("write");
    }
    wal.rotate().expect("rotate");
    wal.write(record::TYPE_BATCH, &payload(7)).expect("write");
    drop(wal);
    let seg = segment_path(d.path(), 1);
    let mut bytes = fs::read(&seg).expect("read");
    let rec_len = record::frame(record::TYPE_BATCH, &payload(0)).len();
    bytes[rec_len * 2 + 12] ^= 0xff; // inside the third record's payload
    fs::write(&seg, &bytes).expect("write");
    let (got, t) = read_all(d.path());
    assert_eq!(got.len(), 2);
    let t = t.expect("reported");
    assert_eq!(t.dropped_segments, vec![2]);
    assert!(t.reason.contains("checksum"));
}

#[test]
fn truncate_before_removes_old_segments_only() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(d.path(), WalFsync::None, 1000, 1 << 20).expect("create");
    wal.write(record::TYPE_BATCH, &payload(1)).expect("write");
    wal.rotate().expect("rotate");
    wal.write(record::TYPE_BATCH, &payload(2)).expect("write");
    wal.rotate().expect("rotate");
    assert_eq!(list_segments(d.path()).expect("list"), vec![1, 2, 3]);
    assert_eq!(wal.truncate_before(3).expect("truncate"), 2);
    assert_eq!(list_segments(d.path()).expect("list"), vec![3]);
    assert_eq!(wal.bytes(), 0);
}

#[test]
fn concurrent_appenders_share_fsyncs_and_all_become_durable() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(Wal::create(d.path(), WalFsync::Always, 1000, 64 << 20).expect("create"));
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let pos = wal.write(record::TYPE_BATCH, &payload(k * 100 + i)).expect("write");
                    wal.sync_to(pos).expect("sync");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("join");
    }
    drop(wal);
    assert_eq!(read_all(d.path()).0.len(), 200);
}

#[test]
fn batch_record_round_trips_and_rejects_truncation() {
    let labels = vec![crate::Label::new("a", "b")];
    let mut enc = Vec::new();
    crate::keys::encode_labels(&labels, &mut enc);
    let samples = vec![
        SampleEntry { id: 3, t: i64::MIN, v: f64::from_bits(0x7ff0_0000_0000_0002) },
        SampleEntry { id: 0, t: i64::MAX, v: -0.0 },
    ];
    let mut out = Vec::new();
    record::encode_batch(&[(3, &enc)], &samples, &mut out);
    let (series, back) = record::decode_batch(&out).expect("decode");
    assert_eq!(series, vec![record::SeriesEntry { id: 3, labels }]);
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].v.to_bits(), 0x7ff0_0000_0000_0002);
    assert_eq!((back[0].t, back[1].t), (i64::MIN, i64::MAX));
    for cut in 0..out.len() {
        assert!(record::decode_batch(&out[..cut]).is_err(), "cut {cut}");
    }
}

#[test]
fn poisoned_wal_refuses_writes_and_syncs() {
    let d = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(d.path(), WalFsync::Always, 1000, 1 << 20).expect("create");
    let pos = wal.write(record::TYPE_BATCH, &payload(1)).expect("write");
    wal.poison();
    assert!(matches!(wal.write(record::TYPE_BATCH, &payload(2)), Err(Error::Poisoned)));
    assert!(matches!(wal.sync_to(pos), Err(Error::Poisoned)));
}
