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
    let (got, found) = read_all_damage(dir);
    (got, found.torn_tail)
}

fn read_all_damage(dir: &Path) -> (Vec<Vec<u8>>, ReplayDamage) {
    let mut got = Vec::new();
    let found = replay(dir, |_, _, p| {
        got.push(p.to_vec());
        Ok(())
    })
    .expect("replay");
    (got, found)
}

/// Byte offset of every record frame in a segment.
fn frame_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut off = 0;
    while let record::Frame::Record(_, _, used) = record::read_frame(&bytes[off..]) {
        out.push(off);
        off += used;
    }
    out
}

/// Writes payloads 0..4 to segment 1 and payload 7 to segment 2; returns segment 1's path.
fn two_segments(dir: &Path) -> PathBuf {
    let wal = Wal::create(dir, WalFsync::None, 1000, 1 << 20).expect("create");
    for i in 0..4 {
        wal.write(record::TYPE_BATCH, &payload(i)).expect("write");
    }
    wal.rotate().expect("rotate");
    wal.write(record::TYPE_BATCH, &payload(7)).expect("write");
    drop(wal);
    segment_path(dir, 1)
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
fn flipped_byte_in_a_record_skips_only_that_record_and_keeps_later_segments() {
    let d = tempfile::tempdir().expect("tempdir");
    let seg = two_segments(d.path());
    let mut bytes = fs::read(&seg).expect("read");
    let offs = frame_offsets(&bytes);
    // The last byte of the third record: its value bits, so the payload still decodes.
    bytes[offs[3] - 1] ^= 0xff;
    let len = bytes.len();
    fs::write(&seg, &bytes).expect("write");
    let (got, found) = read_all_damage(d.path());
    assert_eq!(got, [0, 1, 3, 7].map(payload).to_vec());
    assert!(found.torn_tail.is_none(), "damage with records after it is not a tail");
    assert_eq!(found.damaged.len(), 1);
    let dmg = &found.damaged[0];
    assert_eq!((dmg.segment, dmg.offset, dmg.records, dmg.samples), (1, offs[2] as u64, 1, 1));
    assert_eq!(dmg.bytes, (offs[3] - offs[2]) as u64);
    assert!(dmg.fully_counted && dmg.reason.contains("checksum"), "{dmg:?}");
    // Nothing was deleted or cut: both segments are intact on disk, and a second replay
    // finds (and reports) the same.
    assert_eq!(list_segments(d.path()).expect("list"), vec![1, 2]);
    assert_eq!(fs::metadata(&seg).expect("stat").len(), len as u64);
    assert_eq!(read_all_damage(d.path()), (got, found));
}

#[test]
fn damaged_length_field_resumes_at_the_next_valid_record() {
    let d = tempfile::tempdir().expect("tempdir");
    let seg = two_segments(d.path());
    let mut bytes = fs::read(&seg).expect("read");
    let offs = frame_offsets(&bytes);
    // The second record's length now claims more than the segment holds.
    bytes[offs[1] + 3] = 0x7f;
    fs::write(&seg, &bytes).expect("write");
    let (got, found) = read_all_damage(d.path());
    assert_eq!(got, [0, 2, 3, 7].map(payload).to_vec());
    assert!(found.torn_tail.is_none());
    let dmg = &found.damaged[0];
    assert_eq!((dmg.offset, dmg.bytes), (offs[1] as u64, (offs[2] - offs[1]) as u64));
    assert!(!dmg.fully_counted, "bytes that are no frame hold an unknown number of samples");
}

#[test]
fn garbage_to_the_end_of_an_earlier_segment_keeps_the_later_segment() {
    let d = tempfile::tempdir().expect("tempdir");
    let seg = two_segments(d.path());
    let mut bytes = fs::read(&seg).expect("read");
    let offs = frame_offsets(&bytes);
    for b in &mut bytes[offs[2]..] {
        *b = 0xab;
    }
    fs::write(&seg, &bytes).expect("write");
    let (got, found) = read_all_damage(d.path());
    assert_eq!(got, [0, 1, 7].map(payload).to_vec());
    assert!(found.torn_tail.is_none());
    assert_eq!(found.damaged[0].bytes, (bytes.len() - offs[2]) as u64);
    assert_eq!(fs::read(&seg).expect("read"), bytes, "the damaged segment is kept as it was");
}

#[test]
fn damage_in_the_last_record_of_the_log_is_a_torn_tail_even_before_an_empty_segment() {
    let d = tempfile::tempdir().expect("tempdir");
    let seg = two_segments(d.path());
    // The newest segment is empty (as after a restart that created it), so segment 1's
    // last record is the end of the log.
    fs::write(segment_path(d.path(), 2), b"").expect("empty");
    let mut bytes = fs::read(&seg).expect("read");
    let offs = frame_offsets(&bytes);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&seg, &bytes).expect("write");
    let (got, found) = read_all_damage(d.path());
    assert_eq!(got, (0..3).map(payload).collect::<Vec<_>>());
    assert!(found.damaged.is_empty());
    let t = found.torn_tail.expect("torn tail");
    assert_eq!((t.segment, t.offset), (1, offs[3] as u64));
    assert_eq!(fs::metadata(&seg).expect("stat").len(), offs[3] as u64, "cut at the last good record");
    assert_eq!(list_segments(d.path()).expect("list"), vec![1, 2], "the empty newer segment is not deleted");
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
    let labels = vec![tessera_model::Label::new("a", "b")];
    let mut enc = Vec::new();
    crate::labels_codec::encode_labels(&labels, &mut enc);
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
    wal.poison("disk on fire".into());
    wal.poison("a later cause".into());
    let err = wal.write(record::TYPE_BATCH, &payload(2)).expect_err("poisoned");
    assert!(matches!(&err, Error::Poisoned { cause } if cause == "disk on fire"), "{err}");
    assert!(err.to_string().contains("disk on fire"), "the message names the first cause: {err}");
    assert!(matches!(wal.sync_to(pos), Err(Error::Poisoned { .. })));
}
