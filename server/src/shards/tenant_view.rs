//! [`TenantView`]: one tenant's slice of the local shards, as the
//! [`tessera_query::Queryable`] every read goes through: PromQL selects, remote read,
//! and the index reads (series, label names and values).
//!
//! The trait is synchronous because the engine evaluates on its own thread and the API
//! calls it from the blocking pool (never a runtime worker). Every method is one of the
//! shards' blocking reads ([`Shards::select`] and the index reads): the shards' parts run
//! in parallel (overlapping them is what makes a 16-shard select not 16 times slower
//! than one), each holding one of the process's storage read slots, and stop at the
//! request's deadline or cancel. No runtime is needed.

use std::sync::Arc;

use tessera_model::{Labels, Matcher};
use tessera_query::{ErrorKind, QueryError, QueryOptions, Queryable, ReadResult, SelectHints, SelectResult, Series};
use tessera_storage::Interrupt;

use super::{ShardError, ShardErrorKind, Shards};

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

    /// Runs one of the shards' blocking reads with the user's matchers and the request's
    /// deadline and cancel flag.
    fn read<T>(
        &self,
        matchers: &[Matcher],
        ctl: &QueryOptions,
        f: impl FnOnce(&Shards, &str, &[Matcher], &Interrupt) -> Result<T, ShardError>,
    ) -> Result<T, QueryError> {
        let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
        f(&self.shards, &self.tenant, matchers, &stop).map_err(query_error)
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
        let stored =
            self.read(matchers, ctl, |shards, tenant, ms, stop| shards.select(tenant, ms, mint, maxt, stop))?;
        // `Shards::select` stripped the tenant label and sorted them by the remaining
        // labels: the query order.
        let out = stored.into_iter().map(|s| Series { labels: s.labels, samples: s.samples }).collect();
        Ok(SelectResult::new(out))
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        let sets = self.read(matchers, ctl, |shards, tenant, ms, stop| shards.series(tenant, ms, mint, maxt, stop))?;
        Ok(ReadResult::new(sets))
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        let names =
            self.read(matchers, ctl, |shards, tenant, ms, stop| shards.label_names(tenant, ms, mint, maxt, stop))?;
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
        let values = self
            .read(matchers, ctl, |shards, tenant, ms, stop| shards.label_values(tenant, name, ms, mint, maxt, stop))?;
        Ok(ReadResult::new(values))
    }
}
