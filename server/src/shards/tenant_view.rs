//! [`TenantView`]: one tenant's slice of the local shards, as the
//! [`tessera_query::Queryable`] every read goes through: PromQL selects, remote read,
//! and the index reads (series, label names and values).
//!
//! The trait is synchronous because the engine evaluates on its own thread and the API
//! calls it from the blocking pool (never a runtime worker). `select` calls the engines
//! directly, in parallel with `std::thread::scope`: each engine's `select` blocks on
//! RocksDB reads, and overlapping them is what makes a 16-shard select not 16 times
//! slower than one. The index reads run the shards' async fan-out on the runtime the
//! view was made on ([`tokio::runtime::Handle::block_on`] from the blocking thread), so
//! they stay bounded by the shards' storage slots as before.

use std::sync::Arc;

use tessera_model::{Labels, Matcher};
use tessera_query::{ErrorKind, QueryError, QueryOptions, Queryable, ReadResult, SelectHints, SelectResult, Series};
use tessera_storage::Interrupt;

use super::{strip_tenant, tenant_matchers, ShardError, ShardErrorKind, ShardId, Shards};

/// A tenant-scoped, synchronous read view of the shards.
#[derive(Clone)]
pub struct TenantView {
    shards: Arc<Shards>,
    tenant: String,
    /// The runtime the view was made on, for the index reads; `None` when made outside
    /// one (then only `select` works).
    runtime: Option<tokio::runtime::Handle>,
}

impl TenantView {
    pub fn new(shards: Arc<Shards>, tenant: &str) -> Self {
        TenantView { shards, tenant: tenant.to_owned(), runtime: tokio::runtime::Handle::try_current().ok() }
    }

    /// Runs one of the shards' async index reads to completion from this (blocking)
    /// thread, with the request's deadline and cancel flag.
    fn index_read<T, F, Fut>(&self, matchers: &[Matcher], ctl: &QueryOptions, f: F) -> Result<T, QueryError>
    where
        F: FnOnce(Arc<Shards>, String, Vec<Matcher>, Interrupt) -> Fut,
        Fut: std::future::Future<Output = Result<T, ShardError>>,
    {
        let Some(rt) = &self.runtime else {
            return Err(QueryError::internal("index reads of a tenant view need the tokio runtime it was made on"));
        };
        let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
        rt.block_on(f(Arc::clone(&self.shards), self.tenant.clone(), matchers.to_vec(), stop)).map_err(query_error)
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }
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
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        // The local engines read what the time range says; the other hints are for
        // sources that can push work down.
        let (mint, maxt) = (hints.start, hints.end);
        let ms = tenant_matchers(&self.tenant, matchers).map_err(query_error)?;
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
            out.extend(part.into_iter().map(|s| Series { labels: strip_tenant(s.labels), samples: s.samples }));
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(SelectResult::new(out))
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        let sets = self.index_read(matchers, ctl, |shards, tenant, ms, stop| async move {
            shards.series_until(&tenant, &ms, mint, maxt, stop).await
        })?;
        Ok(ReadResult::new(sets))
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        let names = self.index_read(matchers, ctl, |shards, tenant, ms, stop| async move {
            shards.label_names_until(&tenant, &ms, mint, maxt, stop).await
        })?;
        Ok(ReadResult::new(names))
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        let name = name.to_owned();
        let values = self.index_read(matchers, ctl, |shards, tenant, ms, stop| async move {
            shards.label_values_until(&tenant, &name, &ms, mint, maxt, stop).await
        })?;
        Ok(ReadResult::new(values))
    }
}
