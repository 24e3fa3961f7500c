//! [`ShardsData`]: the query API's view of a tenant's data ([`query_api::TenantData`]),
//! served by the local shards.
//!
//! It only adapts: every read goes through the tenant's `Queryable` (the `TenantView`,
//! where tenancy stays: it adds and strips the tenant label); errors are the server's
//! `ApiError`, which the query API uses too.

use std::sync::Arc;

use futures::future::BoxFuture;
use tessera_query::{Queryable, SelectHints};

use super::query_api::{Cardinality, HeadSummary, TenantData};
use super::AppState;
use crate::error::ApiError;

/// The local shards as the query API's data source.
pub struct ShardsData {
    state: AppState,
}

impl ShardsData {
    pub fn new(state: AppState) -> Self {
        ShardsData { state }
    }
}

impl TenantData for ShardsData {
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, ApiError> {
        Ok(self.state.queryable(tenant)?)
    }

    fn cardinality(&self, tenant: &str) -> BoxFuture<'static, Result<Cardinality, ApiError>> {
        let state = Arc::clone(&self.state);
        let tenant = tenant.to_owned();
        Box::pin(async move {
            // Through the read trait, like every read endpoint.
            let q = state.queryable(&tenant)?;
            // The caller bounds this future with the query timeout; the same deadline (and
            // the cancel flag raised when the future is dropped) stops the scans in storage.
            let deadline = std::time::Instant::now() + state.config.query.timeout();
            let (ctl, _cancel_on_drop) = crate::shards::request_controls(deadline);
            let hints = SelectHints { func: Some("series".into()), ..SelectHints::range(i64::MIN, i64::MAX) };
            let r = tokio::task::spawn_blocking(move || q.series(&[], &hints, &ctl))
                .await
                .map_err(|e| ApiError::internal(format!("series listing task failed: {e}")))??;
            Ok(Cardinality::Series(r.data))
        })
    }

    fn head_summary(&self, _tenant: &str) -> HeadSummary {
        // The engines keep chunk counts and time ranges per shard, not per tenant; say
        // "unknown" rather than report another tenant's numbers.
        HeadSummary::default()
    }

    fn total_series(&self) -> Option<u64> {
        let shards = self.state.shards_if_ready()?;
        Some(shards.stats().iter().map(|(_, s)| s.total_series).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::http::ServerState;
    use crate::shards::{series_hash, PushSeries, Shards};
    use tessera_model::{Label, Sample};
    use tessera_storage::EngineConfig;

    #[tokio::test]
    async fn query_api_sees_only_the_tenants_series_and_not_ready_is_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state: AppState = Arc::new(ServerState::new(Config::default()));
        let data = ShardsData::new(Arc::clone(&state));
        let err = data.queryable("a").err().expect("not ready yet");
        assert_eq!(err.kind, crate::error::ErrorKind::Unavailable);

        let shards = Shards::open(dir.path(), 2, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
        state.set_shards(Arc::new(shards));
        let shards = state.shards().expect("ready");
        for tenant in ["a", "b"] {
            let labels = vec![Label::new("__name__", "up"), Label::new("owner", tenant)];
            let hash = series_hash(tenant, &labels);
            shards
                .push(tenant, vec![PushSeries { labels, samples: vec![Sample { t: 1, v: 1.0 }], hash }])
                .await
                .expect("push");
        }
        let Ok(Cardinality::Series(series)) = data.cardinality("a").await else { panic!("the label sets to count") };
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].get("owner"), Some("a"));
        assert_eq!(series[0].get("__tenant__"), None);
        assert_eq!(data.total_series(), Some(2));
    }
}
