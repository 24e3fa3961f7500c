//! A runner for Prometheus' promqltest scripts (`load`, `clear`, `eval instant|range`
//! with `expect` lines; see `../shared/promqltest/FORMAT.md`), over an in-memory
//! [`Queryable`](crate::Queryable) or any other [`TestStore`]. Used by the conformance test suite and by the
//! `tessera promqltest FILE...` command.

mod parse;
mod run;
mod split;
mod store;

pub use run::{run_cli, run_file, run_files, run_script, run_script_on, Failure, FileSummary, Summary};
pub use split::{
    compare_outputs, compare_outputs_exact, compare_split, SplitSummary, SPLIT_ABS_TOLERANCE, SPLIT_REL_TOLERANCE,
};
pub use store::{eval_in_process, EvalAt, EvalQuery, MemStore, TestStore};

/// The vendored upstream scripts (`testdata/upstream`) whose data a stored path can hold:
/// every one but `native_histograms.test` (its samples are histograms, which remote
/// write and storage carry as floats only). The storage and cluster runners run these.
pub const UPSTREAM_FLOAT_SCRIPTS: &[&str] = &[
    "aggregators.test",
    "collision.test",
    "duration_expression.test",
    "extended_vectors.test",
    "fill-modifier.test",
    "functions.test",
    "histograms.test",
    "info.test",
    "limit.test",
    "literals.test",
    "name_label_dropping.test",
    "operators.test",
    "range_queries.test",
    "selectors.test",
    "start_timestamps.test",
    "trig_functions.test",
    "type_and_unit.test",
];

#[cfg(test)]
mod tests;
