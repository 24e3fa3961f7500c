//! [`ShardsData`]: the query API's view of a tenant's data ([`query_api::TenantData`]),
//! served by the local shards.
//!
//! It only adapts: tenancy stays in `shards` (the `TenantView` and `Shards::series` add
//! and strip the tenant label), and errors are translated into the query API's own
//! error type so the query handlers answer with the same envelope as for their own
//! errors.

use std::sync::Arc;

use futures::future::BoxFuture;
use tessera_query::{Labels, Queryable};

use super::query_api::{self, ApiErrorKind, HeadSummary, TenantData};
use super::AppState;
use crate::error::{ApiError, ErrorKind};

/// The local shards as the query API's data source.
pub struct ShardsData {
    state: AppState,
}

impl ShardsData {
    pub fn new(state: AppState) -> Self {
        ShardsData { state }
    }
}

/// The server's error in the query API's vocabulary (same Prometheus error types).
fn to_query_error(e: ApiError) -> query_api::ApiError {
    let kind = match e.kind {
        ErrorKind::BadData | ErrorKind::TooLarge | ErrorKind::UnsupportedMediaType => ApiErrorKind::BadData,
        ErrorKind::Execution => ApiErrorKind::Execution,
        ErrorKind::TooManyRequests | ErrorKind::Unavailable => ApiErrorKind::Unavailable,
        ErrorKind::NotFound => ApiErrorKind::NotFound,
        ErrorKind::Internal => ApiErrorKind::Internal,
    };
    query_api::ApiError { kind, message: e.message }
}

impl TenantData for ShardsData {
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, query_api::ApiError> {
        let view = self.state.tenant_view(tenant).map_err(to_query_error)?;
        Ok(Arc::new(view))
    }

    fn series_labels(&self, tenant: &str) -> BoxFuture<'static, Result<Vec<Labels>, query_api::ApiError>> {
        let state = Arc::clone(&self.state);
        let tenant = tenant.to_owned();
        Box::pin(async move {
            let shards = state.shards().map_err(to_query_error)?;
            let all = shards.series(&tenant, &[], i64::MIN, i64::MAX).await.map_err(to_query_error)?;
            Ok(all
                .into_iter()
                .map(|ls| {
                    // Storage label sets are sorted and unique, and the tenant label is gone.
                    Labels::from_sorted(
                        ls.into_iter().map(|l| tessera_query::Label { name: l.name, value: l.value }).collect(),
                    )
                })
                .collect())
        })
    }

    fn head_summary(&self, _tenant: &str) -> HeadSummary {
        // The engines keep chunk counts and time ranges per shard, not per tenant; say
        // "unknown" rather than report another tenant's numbers.
        HeadSummary::default()
    }

    fn total_series(&self) -> Option<u64> {
        let shards = self.state.shards_if_ready()?;
        Some(shards.stats().iter().map(|s| s.total_series).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::http::ServerState;
    use crate::shards::{series_hash, PushSeries, Shards};
    use tessera_storage::{EngineConfig, Label, Sample};

    #[tokio::test]
    async fn query_api_sees_only_the_tenants_series_and_not_ready_is_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state: AppState = Arc::new(ServerState::new(Config::default()));
        let data = ShardsData::new(Arc::clone(&state));
        let err = data.queryable("a").err().expect("not ready yet");
        assert_eq!(err.kind, ApiErrorKind::Unavailable);

        let shards = Shards::open(dir.path(), 2, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
        state.set_shards(Arc::new(shards));
        let shards = state.shards().expect("ready");
        for tenant in ["a", "b"] {
            let labels = vec![Label::new("__name__", "up"), Label::new("owner", tenant)];
            let hash = series_hash(tenant, &labels);
            shards.push(tenant, vec![PushSeries { labels, samples: vec![Sample { t: 1, v: 1.0 }], hash }]).await.expect("push");
        }
        let series = data.series_labels("a").await.expect("series");
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].get("owner"), Some("a"));
        assert_eq!(series[0].get("__tenant__"), None);
        assert_eq!(data.total_series(), Some(2));
    }
}
