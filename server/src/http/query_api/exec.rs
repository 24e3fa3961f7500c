//! Running PromQL evaluations off the async I/O threads, bounded and cancellable.
//!
//! Evaluation is CPU-bound and reads storage synchronously, so it runs on tokio's blocking
//! pool, never on a runtime worker: a week-long range query must not delay remote-write
//! requests served by the same runtime. A semaphore bounds how many evaluations run at once
//! (queries beyond that wait, up to their own deadline, like Prometheus' query queue). Each
//! evaluation gets a deadline and a cancel flag; the flag is raised when the HTTP handler's
//! future is dropped (the client went away, or the server is shutting down), so the engine can
//! stop early instead of finishing work nobody will read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_query::QueryError;
use tokio::sync::Semaphore;

/// What an evaluation must watch: stop with a timeout error after `deadline`, and with a
/// canceled error as soon as `cancel` is true.
#[derive(Debug, Clone)]
pub struct QueryControl {
    pub deadline: Instant,
    pub cancel: Arc<AtomicBool>,
}

impl QueryControl {
    /// The error to stop with, if the work should stop now.
    pub fn stop_reason(&self) -> Option<QueryError> {
        if self.cancel.load(Ordering::Relaxed) {
            Some(QueryError::new(tessera_query::ErrorKind::Canceled, "query was canceled"))
        } else if Instant::now() >= self.deadline {
            Some(timeout_error("expression evaluation"))
        } else {
            None
        }
    }
}

/// Raises the cancel flag when dropped. It lives in the handler's future, so dropping that
/// future (client disconnect) cancels the evaluation running on the blocking pool.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        // Harmless after a normal completion: nobody reads the flag any more.
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How long past its deadline we wait for an evaluation that does not notice it, before
/// answering "timeout" anyway. The engine checks the deadline itself; this is the backstop for
/// a long stretch of work between two checks.
const DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// Bounds and runs evaluations.
pub struct Executor {
    permits: Arc<Semaphore>,
}

impl Executor {
    /// `max_concurrent` evaluations at once; 0 is treated as 1 (a server that can run no query
    /// at all is a configuration mistake that `QueryLimits::validate` rejects earlier).
    pub fn new(max_concurrent: usize) -> Self {
        Executor { permits: Arc::new(Semaphore::new(max_concurrent.max(1))) }
    }

    /// Runs `job` on the blocking pool once a slot is free, giving it a control with
    /// `deadline` and a cancel flag tied to this future's lifetime.
    pub async fn run<T, F>(&self, deadline: Instant, job: F) -> Result<T, QueryError>
    where
        T: Send + 'static,
        F: FnOnce(&QueryControl) -> Result<T, QueryError> + Send + 'static,
    {
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        let tokio_deadline = tokio::time::Instant::from_std(deadline);

        // Waiting for a slot counts against the query's deadline, as in Prometheus.
        let permit = match tokio::time::timeout_at(tokio_deadline, self.permits.clone().acquire_owned()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_closed)) => return Err(QueryError::internal("query executor is shut down")),
            Err(_elapsed) => return Err(timeout_error("query queue")),
        };

        let ctl = QueryControl { deadline, cancel: cancel.clone() };
        let handle = tokio::task::spawn_blocking(move || {
            // The permit moves into the blocking task so that the slot is released when the
            // evaluation really ends, not when an impatient client disconnects.
            let _permit = permit;
            job(&ctl)
        });

        match tokio::time::timeout_at(tokio_deadline + DEADLINE_GRACE, handle).await {
            Ok(Ok(result)) => result,
            Ok(Err(join_err)) => Err(QueryError::internal(format!("query evaluation panicked: {join_err}"))),
            Err(_elapsed) => {
                // Tell the evaluation to stop; its slot frees when it notices.
                cancel.store(true, Ordering::Relaxed);
                Err(timeout_error("expression evaluation"))
            }
        }
    }
}

/// Prometheus' timeout message: `query timed out in <where>`.
fn timeout_error(phase: &str) -> QueryError {
    QueryError::new(tessera_query::ErrorKind::Timeout, format!("query timed out in {phase}"))
}
