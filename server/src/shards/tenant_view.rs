//! [`TenantView`]: one tenant's slice of the local shards, as the PromQL engine's
//! [`tessera_query::Queryable`].
//!
//! The trait is synchronous because the engine evaluates on a blocking thread (never a
//! runtime worker), so this view calls the engines directly. The shards are read in
//! parallel with `std::thread::scope`: each engine's `select` blocks on RocksDB reads,
//! and overlapping them is what makes a 16-shard select not 16 times slower than one.

use std::sync::Arc;

use tessera_query::{ErrorKind, Labels, QueryError, QueryOptions, Queryable, Series};
use tessera_storage::{Interrupt, MatchOp, Matcher};

use super::{tenant_matchers, ShardError, ShardErrorKind, ShardId, Shards, TENANT_LABEL};

/// A tenant-scoped, synchronous read view of the shards.
#[derive(Clone)]
pub struct TenantView {
    shards: Arc<Shards>,
    tenant: String,
}

impl TenantView {
    pub fn new(shards: Arc<Shards>, tenant: &str) -> Self {
        TenantView { shards, tenant: tenant.to_owned() }
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }
}

/// Converts the engine's matcher into a compiled storage matcher.
fn to_storage_matcher(m: &tessera_query::Matcher) -> Result<Matcher, QueryError> {
    let op = match m.op {
        tessera_query::MatchOp::Equal => MatchOp::Equal,
        tessera_query::MatchOp::NotEqual => MatchOp::NotEqual,
        tessera_query::MatchOp::Regex => MatchOp::Regex,
        tessera_query::MatchOp::NotRegex => MatchOp::NotRegex,
    };
    Matcher::new(&m.name, op, &m.value).map_err(|e| QueryError::bad_data(e.to_string()))
}

/// A shard error as the query engine's: every class is kept (an interrupted scan is a
/// timeout 503 or canceled 499 as if stopped in the evaluator; a poisoned or busy shard
/// is unavailable 503; corruption is internal 500).
pub(crate) fn query_error(e: ShardError) -> QueryError {
    let kind = match e.kind {
        ShardErrorKind::BadData => ErrorKind::BadData,
        ShardErrorKind::Unavailable => ErrorKind::Unavailable,
        ShardErrorKind::Timeout => ErrorKind::Timeout,
        ShardErrorKind::Canceled => ErrorKind::Canceled,
        ShardErrorKind::Internal => ErrorKind::Internal,
    };
    QueryError::new(kind, e.message)
}

/// A storage error of shard `id` as the query engine's, classified by [`super::classify`].
fn storage_query_error(id: ShardId, e: &tessera_storage::Error) -> QueryError {
    let mut err = query_error(ShardError::from_storage(Some(id), e));
    match err.kind {
        ErrorKind::Timeout => err.message = format!("query timed out in storage (shard {id}): {e}"),
        ErrorKind::Canceled => err.message = format!("query was canceled in storage (shard {id})"),
        _ => {}
    }
    err
}

impl Queryable for TenantView {
    fn select(&self, matchers: &[tessera_query::Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, QueryError> {
        self.select_controlled(matchers, mint, maxt, &QueryOptions::default())
    }

    fn select_controlled(
        &self,
        matchers: &[tessera_query::Matcher],
        mint: i64,
        maxt: i64,
        ctl: &QueryOptions,
    ) -> Result<Vec<Series>, QueryError> {
        let user: Vec<Matcher> = matchers.iter().map(to_storage_matcher).collect::<Result<_, _>>()?;
        let ms = tenant_matchers(&self.tenant, &user).map_err(query_error)?;
        let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
        let engines = &self.shards.engines;
        let parts: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> =
                engines.iter().map(|(id, e)| (*id, s.spawn(|| e.select_until(&ms, mint, maxt, &stop)))).collect();
            handles
                .into_iter()
                .map(|(id, h)| (id, h.join().map_err(|_| QueryError::internal("a shard's select thread panicked"))))
                .collect()
        });
        let mut out = Vec::new();
        for (id, part) in parts {
            let part = part?.map_err(|e| storage_query_error(id, &e))?;
            for s in part {
                // Storage labels are sorted and unique; dropping one keeps them so.
                let labels: Vec<tessera_query::Label> = s
                    .labels
                    .into_iter()
                    .filter(|l| l.name != TENANT_LABEL)
                    .map(|l| tessera_query::Label { name: l.name, value: l.value })
                    .collect();
                let samples = s.samples.into_iter().map(|p| tessera_query::Sample { t: p.t, v: p.v }).collect();
                out.push(Series { labels: Labels::from_sorted(labels), samples });
            }
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }
}
