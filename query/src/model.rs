//! The read contract of the engine: [`Series`], [`SelectHints`], [`ReadResult`] and the
//! [`Queryable`] trait through which all data enters the engine. Labels, samples and
//! (compiled) matchers are the shared data model of `tessera_model`, so a source
//! passes them through unconverted.

use tessera_model::{Labels, Matcher, Sample};

/// A series as returned by [`Queryable::select`]: samples in strictly increasing time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

/// What the reader of a select will do with the data, so a data source can prune or
/// push work down (Prometheus' `storage.SelectHints`). `start` and `end` bound the
/// samples wanted; the rest is advice a source may ignore.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectHints {
    /// Earliest sample wanted, ms since the epoch, inclusive.
    pub start: i64,
    /// Latest sample wanted, ms since the epoch, inclusive.
    pub end: i64,
    /// Step of the evaluation grid, ms; 0 for an instant evaluation or an index read.
    pub step: i64,
    /// The range of a matrix selector (`x[5m]` → 300000), ms; 0 for an instant selector.
    pub range: i64,
    /// The function or aggregation the selector feeds (`rate`, `sum`), as Prometheus
    /// names it; `"series"` for an index read that wants label sets only; `None` when
    /// the selector feeds a binary operator or stands alone.
    pub func: Option<String>,
    /// The grouping labels of the aggregation the selector is under, if any.
    pub grouping: Vec<String>,
    /// Whether `grouping` is a `by` list (true) or a `without` list (false).
    pub by: bool,
    /// When set, the only labels of each series the answer depends on (sorted names):
    /// a source may leave the others out of the series it returns, and skip decoding
    /// them. The engine sets it where nothing but these labels is read and series are
    /// never told apart by their labels (an aggregation into one group needs the metric
    /// name alone, for the annotations that name it); unlike `grouping`, which is a
    /// hint, it is a promise.
    pub only_labels: Option<Vec<String>>,
    /// When set, a source may hand out series with the same timestamps (series scraped
    /// together) one after another rather than in its own order. The engine sets it
    /// where the order changes the answer by float rounding alone and state is kept per
    /// set of timestamps: `sum(rate(…))` adds a target's series against one table of
    /// windows, which stays in the CPU's caches only while that target's series come.
    pub same_times_together: bool,
}

impl SelectHints {
    /// Hints that only bound the time range.
    pub fn range(start: i64, end: i64) -> Self {
        SelectHints { start, end, ..Default::default() }
    }

    /// Whether the engine reads the selected samples' values. It does not when the
    /// selector feeds a function that only counts samples (`count_over_time`,
    /// `present_over_time`, `absent_over_time`: they read timestamps, and skip
    /// staleness markers); a source may then return any value except the staleness
    /// marker for the other samples, and skip decoding them.
    pub fn reads_values(&self) -> bool {
        !matches!(self.func.as_deref(), Some("count_over_time" | "present_over_time" | "absent_over_time"))
    }
}

/// One select a query will make, announced before evaluation through
/// [`Queryable::prepare`]: the matchers and hints of a later [`Queryable::select`] call,
/// which evaluation may narrow to a few labels ([`SelectHints::only_labels`], announced
/// as `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedSelect {
    pub matchers: Vec<Matcher>,
    pub hints: SelectHints,
}

/// A read's answer plus the warnings of a source that answered partially (a shard or
/// replica missing when the user allowed partial results), which the API passes on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadResult<T> {
    pub data: T,
    pub warnings: Vec<String>,
}

impl<T> ReadResult<T> {
    pub fn new(data: T) -> Self {
        ReadResult { data, warnings: Vec::new() }
    }
}

/// The result of [`Queryable::select`].
pub type SelectResult = ReadResult<Vec<Series>>;

/// The series of a [`Queryable::select_stream`], one at a time, in label order; an
/// `Err` item ends the stream (a failed or interrupted read).
pub type SeriesStream<'a> = Box<dyn Iterator<Item = Result<Series, crate::QueryError>> + 'a>;

/// The only way data enters the engine and the read API: samples for PromQL and remote
/// read, label sets, names and values for the index endpoints. Implemented by the local
/// shards (server), later by a querier over remote ingesters, and by the in-memory
/// store the promqltest runner uses.
///
/// Calls are synchronous: the engine evaluates on its own thread and the API calls the
/// index methods from the blocking pool. Every call gets the request's deadline and
/// cancel flag in `ctl`; sources whose reads can take long stop with a timeout or
/// canceled error.
pub trait Queryable: Send + Sync {
    /// Called once per query, before evaluation, with every select evaluation will then
    /// make, in evaluation order (fewer are made if evaluation stops on an error). A
    /// remote source starts fetching them all concurrently here and answers the later
    /// `select` calls from those fetches; a local source reads lazily and ignores it
    /// (the default), so nothing is held in memory before it is needed.
    fn prepare(&self, _selects: &[PlannedSelect], _ctl: &crate::QueryOptions) {}

    /// The shards of a source that can evaluate query fragments shard by shard (see
    /// [`crate::fragment`]); `None` (the default) for a source the engine only selects
    /// from. When present, the engine pushes what its planner can down to the shards
    /// and merges the partial results.
    fn shard_evaluator(&self) -> Option<&dyn crate::ShardEvaluator> {
        None
    }

    /// Every series matching all `matchers`, with its samples
    /// `hints.start <= t <= hints.end` (milliseconds, both inclusive) in time order.
    /// The matchers come compiled (regexes and fast paths built once per selector); a
    /// source tests label values with `Matcher::matches` or plans index lookups with
    /// `Matcher::pattern`. Series with no sample in the range may be omitted. Stale
    /// markers (NaN with bits `0x7ff0000000000002`) are returned as stored; the engine
    /// interprets them.
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<SelectResult, crate::QueryError>;

    /// [`Queryable::select`] as a stream: the same series (each label set once, in any
    /// order: a store streams in the order it reads fastest, the local shards in storage
    /// order), handed out one at a time so that the engine can fold each into its
    /// step results and drop it before the next is read. A source that reads lazily
    /// (the local shards decode one series' chunks per item) keeps only the series in
    /// flight in memory; the default reads everything through `select` first, so a
    /// source that cannot stream still answers. The engine calls it for the query
    /// shapes it evaluates series by series (see the crate README, "Streaming").
    fn select_stream<'a>(
        &'a self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<ReadResult<SeriesStream<'a>>, crate::QueryError> {
        let mut r = self.select(matchers, hints, ctl)?;
        r.data.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(ReadResult { data: Box::new(r.data.into_iter().map(Ok)), warnings: r.warnings })
    }

    /// The label sets of the series matching all `matchers` with data in
    /// `[hints.start, hints.end]`, sorted and unique. The default reads them through
    /// [`Queryable::select`]; an indexed source answers from its index.
    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, crate::QueryError> {
        let r = self.select(matchers, hints, ctl)?;
        let mut labels: Vec<Labels> = r.data.into_iter().map(|s| s.labels).collect();
        labels.sort();
        labels.dedup();
        Ok(ReadResult { data: labels, warnings: r.warnings })
    }

    /// The label names used by the series matching all `matchers` (all series when
    /// empty) with data in the range, sorted and unique.
    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, crate::QueryError> {
        let r = self.series(matchers, hints, ctl)?;
        let names: std::collections::BTreeSet<String> =
            r.data.iter().flat_map(|ls| ls.iter().map(|l| l.name.to_string())).collect();
        Ok(ReadResult { data: names.into_iter().collect(), warnings: r.warnings })
    }

    /// The values of label `name` among the series matching all `matchers` (all series
    /// when empty) with data in the range, sorted and unique.
    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, crate::QueryError> {
        let r = self.series(matchers, hints, ctl)?;
        let values: std::collections::BTreeSet<String> =
            r.data.iter().filter_map(|ls| ls.get(name).map(str::to_owned)).collect();
        Ok(ReadResult { data: values.into_iter().collect(), warnings: r.warnings })
    }
}
