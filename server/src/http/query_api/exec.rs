//! Running PromQL work (parsing, printing, evaluating) off the async I/O threads, bounded
//! and cancellable.
//!
//! Evaluation is CPU-bound and reads storage synchronously, so it never runs on a runtime
//! worker: a week-long range query must not delay remote-write requests served by the same
//! runtime. Each job gets a thread of its own with a large stack
//! ([`EVAL_STACK_BYTES`]): parsing and evaluating recurse once per level of the query,
//! which the depth limit bounds, and evaluation frames are larger than tokio's 2 MiB
//! blocking threads leave room for at that depth (a stack overflow aborts the process).
//! A semaphore bounds how many jobs run at once (jobs beyond that wait, up to their own
//! deadline, like Prometheus' query queue), and so how many such threads exist. Each job
//! gets a deadline and a cancel flag; the flag is raised when the HTTP handler's future
//! is dropped (the client went away, or the server is shutting down), so the engine can
//! stop early instead of finishing work nobody will read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tessera_query::engine::limits::EVAL_STACK_BYTES;
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
/// future (client disconnect) cancels the evaluation running on its query thread.
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

/// Query threads running in this process, and their end signalled. They are not the
/// runtime's, so its shutdown does not wait for them; [`wait_for_query_threads`] does.
static RUNNING: Mutex<usize> = Mutex::new(0);
static ENDED: Condvar = Condvar::new();

/// Counts one query thread while it lives (also when its work panics).
struct Running;

impl Running {
    fn start() -> Running {
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        ENDED.notify_all();
    }
}

/// Waits until no query thread runs, at most `timeout`; whether none does. For the end
/// of the process: by then the runtime is shut down, which dropped the handlers' futures
/// and so raised every evaluation's cancel flag. A process that exits while a query
/// thread is still inside RocksDB destroys RocksDB's static objects under it, and the
/// thread aborts the process ("pthread lock: Invalid argument", seen in the SIGTERM
/// flood test) instead of the clean exit a shutdown owes.
pub fn wait_for_query_threads(timeout: Duration) -> bool {
    let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    let (running, _) = ENDED.wait_timeout_while(running, timeout, |n| *n > 0).unwrap_or_else(|e| e.into_inner());
    *running == 0
}

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

    /// Runs `job` on a query thread once a slot is free, giving it a control with
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
        let (tx, rx) = tokio::sync::oneshot::channel();
        let running = Running::start();
        std::thread::Builder::new()
            .name("tessera-query".into())
            .stack_size(EVAL_STACK_BYTES)
            .spawn(move || {
                // The permit moves into the thread so that the slot is released when the
                // work really ends, not when an impatient client disconnects.
                let _permit = permit;
                let _running = running;
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&ctl)));
                // The receiver is gone when the request was dropped; nobody needs the answer.
                let _ = tx.send(result);
            })
            .map_err(|e| QueryError::internal(format!("cannot start a query thread: {e}")))?;

        match tokio::time::timeout_at(tokio_deadline + DEADLINE_GRACE, rx).await {
            Ok(Ok(Ok(result))) => result,
            Ok(Ok(Err(panic))) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(QueryError::internal(format!("query evaluation panicked: {what}")))
            }
            Ok(Err(_closed)) => Err(QueryError::internal("query thread ended without an answer")),
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
