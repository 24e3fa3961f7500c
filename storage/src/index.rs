//! Reading the per-day inverted index: matchers → series ids, label names and values.
//!
//! A series' labels never change, so "matches all matchers on some day in range" equals
//! "(union over days of matcher 1) ∩ (union over days of matcher 2) ∩ …": each matcher
//! is evaluated over the whole day range, then the results are intersected.
//!
//! Cost is bounded by the data that exists, not by the time range asked for: `Index::new`
//! is given the days in range that have postings (the head's day set, filled at open by
//! [`existing_days`] with one seek per such day, skipping empty days however many), and
//! every loop visits only those days. Each loop checks the
//! caller's [`Interrupt`] between RocksDB reads.

use std::collections::BTreeSet;

use roaring::RoaringBitmap;
use rocksdb::DB;

use crate::db::{decode_bitmap, CF_POSTINGS};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::keys;
use tessera_model::{MatchOp, Matcher, ValueScan};

pub struct Index<'a> {
    db: &'a DB,
    cf: &'a rocksdb::ColumnFamily,
    /// The days in the requested range that have postings, ascending.
    days: Vec<i32>,
    stop: &'a Interrupt,
}

impl<'a> Index<'a> {
    /// An index over `days` (ascending, each with postings: the head's day set).
    pub fn new(db: &'a DB, days: Vec<i32>, stop: &'a Interrupt) -> Result<Index<'a>> {
        Ok(Index { db, cf: postings_cf(db)?, days, stop })
    }

    fn days(&self) -> impl Iterator<Item = i32> + '_ {
        self.days.iter().copied()
    }

    fn get(&self, key: &[u8]) -> Result<Option<RoaringBitmap>> {
        match self.db.get_pinned_cf(self.cf, key).map_err(Error::rocks("get postings"))? {
            Some(v) => Ok(Some(decode_bitmap(&v)?)),
            None => Ok(None),
        }
    }

    /// Every series with data in the day range.
    pub fn all(&self) -> Result<RoaringBitmap> {
        let mut acc = RoaringBitmap::new();
        for d in self.days() {
            self.stop.check("index scan")?;
            if let Some(b) = self.get(&keys::all_postings_key(d))? {
                acc |= b;
            }
        }
        Ok(acc)
    }

    /// Calls `f(value, serialized bitmap)` for every stored value of `name` starting with
    /// `prefix`; the callback decides whether the bitmap is worth decoding.
    fn scan_values(&self, name: &str, prefix: &str, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        for d in self.days() {
            let name_prefix = keys::postings_name_prefix(d, name)?;
            let mut start = name_prefix.clone();
            start.extend_from_slice(prefix.as_bytes());
            let mut it = self.db.raw_iterator_cf(self.cf);
            it.seek(&start);
            let mut n = 0usize;
            while it.valid() {
                self.stop.check_every(n, "index scan")?;
                n += 1;
                let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
                if !k.starts_with(&start) {
                    break;
                }
                f(&k[name_prefix.len()..], v)?;
                it.next();
            }
            it.status().map_err(Error::rocks("scan postings"))?;
        }
        Ok(())
    }

    /// Series whose value of `name` satisfies `pred` (missing labels never included).
    fn union_where(&self, name: &str, scan: ValueScan<'_>, pred: impl Fn(&str) -> bool) -> Result<RoaringBitmap> {
        let mut acc = RoaringBitmap::new();
        match scan {
            ValueScan::Exact(values) => {
                for v in values {
                    if v.is_empty() || !pred(v) {
                        continue;
                    }
                    for d in self.days() {
                        self.stop.check("index scan")?;
                        if let Some(b) = self.get(&keys::postings_key(d, name, v)?)? {
                            acc |= b;
                        }
                    }
                }
            }
            ValueScan::Prefix(prefix) => {
                self.scan_values(name, prefix, |v, b| {
                    if std::str::from_utf8(v).is_ok_and(&pred) {
                        acc |= decode_bitmap(b)?;
                    }
                    Ok(())
                })?;
            }
        }
        Ok(acc)
    }

    /// Series selected by one matcher, with Prometheus semantics for missing labels.
    pub fn matcher(&self, m: &Matcher, all: &mut Option<RoaringBitmap>) -> Result<RoaringBitmap> {
        let p = m.pattern();
        let positive_matches_empty = p.matches("");
        let mut all_series = || -> Result<RoaringBitmap> {
            if all.is_none() {
                *all = Some(self.all()?);
            }
            Ok(all.clone().expect("just filled"))
        };
        Ok(match (m.is_negated(), positive_matches_empty) {
            // name=~P, P("") false: series having a value matching P.
            (false, false) => self.union_where(m.name(), p.scan(), |v| p.matches(v))?,
            // name=~P, P("") true: everything except series whose value fails P.
            (false, true) => all_series()? - self.union_where(m.name(), ValueScan::Prefix(""), |v| !p.matches(v))?,
            // name!~P, P("") false: everything except series whose value matches P.
            (true, false) => all_series()? - self.union_where(m.name(), p.scan(), |v| p.matches(v))?,
            // name!~P, P("") true: series having a value that fails P.
            (true, true) => self.union_where(m.name(), ValueScan::Prefix(""), |v| !p.matches(v))?,
        })
    }

    /// Series matching every matcher; no matchers selects every series in range.
    pub fn select(&self, matchers: &[Matcher]) -> Result<RoaringBitmap> {
        let mut all = None;
        if matchers.is_empty() {
            return self.all();
        }
        // Cheap, selective matchers (`=` on a non-empty value) first, so an empty
        // intersection stops before any scan.
        let mut order: Vec<&Matcher> = matchers.iter().collect();
        order.sort_by_key(|m| m.op() != MatchOp::Equal || m.value().is_empty());
        let mut acc: Option<RoaringBitmap> = None;
        for m in order {
            let b = self.matcher(m, &mut all)?;
            let next = match acc {
                None => b,
                Some(a) => a & b,
            };
            if next.is_empty() {
                return Ok(next);
            }
            acc = Some(next);
        }
        Ok(acc.unwrap_or_default())
    }

    /// Distinct label names with postings in range held by a series of `within` (any
    /// series when `None`) that is not in `gone`. Once a name qualifies, the scan skips
    /// over its other values.
    pub fn label_names(&self, within: Option<&RoaringBitmap>, gone: &RoaringBitmap) -> Result<BTreeSet<String>> {
        let check = within.is_some() || !gone.is_empty();
        let mut names = BTreeSet::new();
        for d in self.days() {
            let day = keys::day_prefix(d);
            let mut it = self.db.raw_iterator_cf(self.cf);
            it.seek(day);
            let mut n = 0usize;
            while it.valid() {
                self.stop.check_every(n, "index scan")?;
                n += 1;
                let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
                if !k.starts_with(&day) {
                    break;
                }
                let (_, name, _) = keys::parse_postings_key(k)?;
                let name_end = 6 + name.len();
                let listed = name.is_empty() || names.contains(&*String::from_utf8_lossy(name));
                if !listed && check && !counts(v, within, gone)? {
                    it.next(); // this value's series do not count; try the name's next one
                    continue;
                }
                if !listed {
                    names.insert(String::from_utf8_lossy(name).into_owned());
                }
                match keys::prefix_successor(&k[..name_end]) {
                    Some(s) => it.seek(s),
                    None => break,
                }
            }
            it.status().map_err(Error::rocks("scan postings"))?;
        }
        Ok(names)
    }

    /// Distinct values of one label with postings in range held by a series of `within`
    /// (any series when `None`) that is not in `gone`.
    pub fn label_values(
        &self,
        name: &str,
        within: Option<&RoaringBitmap>,
        gone: &RoaringBitmap,
    ) -> Result<BTreeSet<String>> {
        let mut values = BTreeSet::new();
        self.scan_values(name, "", |v, ids| {
            let v = String::from_utf8_lossy(v);
            if values.contains(&*v) {
                return Ok(());
            }
            if (within.is_some() || !gone.is_empty()) && !counts(ids, within, gone)? {
                return Ok(());
            }
            values.insert(v.into_owned());
            Ok(())
        })?;
        Ok(values)
    }

    /// The series with postings on the first day in range and on no later day in range:
    /// the only ones whose data can end before a range that starts within that first day
    /// (a series with postings on a later day has data there).
    pub fn first_day_only(&self) -> Result<RoaringBitmap> {
        let Some((&first, later)) = self.days.split_first() else { return Ok(RoaringBitmap::new()) };
        let Some(mut ids) = self.get(&keys::all_postings_key(first))? else { return Ok(RoaringBitmap::new()) };
        for &d in later {
            self.stop.check("index scan")?;
            if let Some(b) = self.get(&keys::all_postings_key(d))? {
                ids -= b;
            }
        }
        Ok(ids)
    }

    /// The first day in range with postings.
    pub fn first_day(&self) -> Option<i32> {
        self.days.first().copied()
    }
}

/// Whether the postings `ids` (serialized) hold a series of `within` (any series when
/// `None`) that is not in `gone`.
fn counts(ids: &[u8], within: Option<&RoaringBitmap>, gone: &RoaringBitmap) -> Result<bool> {
    let mut ids = decode_bitmap(ids)?;
    if let Some(within) = within {
        ids &= within;
    }
    Ok(!ids.is_subset(gone)) // an empty set is a subset
}

fn postings_cf(db: &DB) -> Result<&rocksdb::ColumnFamily> {
    db.cf_handle(CF_POSTINGS).ok_or_else(|| Error::corrupt("rocksdb", "missing postings column family"))
}

/// The days in `lo..=hi` that have at least one postings key, found with one seek per
/// such day: a sample dated in 1970 next to today's data costs two days, not 20,000.
/// Each seek merges the postings operands of the key it lands on, so this runs once,
/// when a shard opens; afterwards the head keeps the day set (`Head::days`).
pub fn existing_days(db: &DB, lo: i32, hi: i32, stop: &Interrupt) -> Result<Vec<i32>> {
    let cf = postings_cf(db)?;
    let mut days = Vec::new();
    if lo > hi {
        return Ok(days);
    }
    let mut it = db.raw_iterator_cf(cf);
    it.seek(keys::day_prefix(lo));
    while it.valid() {
        stop.check("index scan")?;
        let Some(k) = it.key() else { break };
        let d = keys::parse_day(k)?;
        if d > hi {
            break;
        }
        days.push(d);
        match d.checked_add(1) {
            Some(next) => it.seek(keys::day_prefix(next)),
            None => break,
        }
    }
    it.status().map_err(Error::rocks("scan postings"))?;
    Ok(days)
}
