//! [`TenantData`] over the all-in-one node's shards ([`ServerState`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use tessera_query::{Label, Labels, Queryable};

use super::response::ApiError;
use super::{HeadSummary, TenantData};
use crate::http::ServerState;

impl TenantData for ServerState {
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, ApiError> {
        // 503 `unavailable` until the WAL replay finished.
        Ok(Arc::new(self.tenant_view(tenant)?))
    }

    fn series_labels(&self, tenant: &str) -> BoxFuture<'static, Result<Vec<Labels>, ApiError>> {
        let shards = self.shards();
        let tenant = tenant.to_owned();
        Box::pin(async move {
            let shards = shards?;
            // The whole index of the tenant: storage clamps the range to days it has.
            let series = shards.series(&tenant, &[], i64::MIN, i64::MAX).await?;
            Ok(series
                .into_iter()
                .map(|labels| {
                    // Storage label sets are sorted and unique, as `Labels` requires.
                    Labels::from_sorted(labels.into_iter().map(|l| Label { name: l.name, value: l.value }).collect())
                })
                .collect())
        })
    }

    fn head_summary(&self, _tenant: &str) -> HeadSummary {
        // Storage counts chunks and time ranges per shard, not per tenant; report nothing
        // rather than another tenant's numbers.
        HeadSummary::default()
    }

    fn total_series(&self) -> Option<u64> {
        self.shards_if_ready().map(|s| s.stats().iter().map(|st| st.total_series).sum())
    }
}
