//! A runner for Prometheus' promqltest scripts (`load`, `clear`, `eval instant|range`
//! with `expect` lines; see `../shared/promqltest/FORMAT.md`), over an in-memory
//! [`Queryable`](crate::Queryable) or any other [`TestStore`]. Used by the conformance test suite and by the
//! `tessera promqltest FILE...` command.

mod parse;
mod run;
mod split;
mod store;

pub use run::{run_cli, run_file, run_files, run_script, run_script_on, Failure, FileSummary, Summary};
pub use split::{compare_outputs, compare_split, SplitSummary, SPLIT_ABS_TOLERANCE, SPLIT_REL_TOLERANCE};
pub use store::{eval_in_process, EvalAt, EvalQuery, MemStore, TestStore};

#[cfg(test)]
mod tests;
