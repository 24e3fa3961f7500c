//! [`Interrupt`]: how the caller of a long read (select, series, label names and values)
//! stops it: a deadline, a cancel flag, or both. Storage checks it between RocksDB reads
//! and stops with `Error::Interrupted`, so a caller that gave up gets its thread (and
//! whatever slot it holds) back instead of waiting for a scan nobody will read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};

/// When a read must stop. The default never stops.
#[derive(Clone, Debug, Default)]
pub struct Interrupt {
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
}

impl Interrupt {
    /// Never stops (tests, tools, and calls already bounded otherwise).
    pub fn none() -> Interrupt {
        Interrupt::default()
    }

    /// Stops once `deadline` has passed or `cancel` is set, whichever comes first.
    pub fn new(deadline: Option<Instant>, cancel: Option<Arc<AtomicBool>>) -> Interrupt {
        Interrupt { deadline, cancel }
    }

    /// The deadline, if any (callers also bound their own waiting by it).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// `Err(Error::Interrupted)` naming `what` if the read must stop now.
    pub fn check(&self, what: &'static str) -> Result<()> {
        self.check_canceled(what)?;
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Interrupted { what, timed_out: true });
        }
        Ok(())
    }

    /// `check` without the clock: fails only when the cancel flag is set (one load, for
    /// a caller that checks per series and leaves the deadline to a coarser check).
    pub fn check_canceled(&self, what: &'static str) -> Result<()> {
        if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(Error::Interrupted { what, timed_out: false });
        }
        Ok(())
    }

    /// `check`, but only every 1024th call of a tight loop (`i` is the loop counter).
    pub(crate) fn check_every(&self, i: usize, what: &'static str) -> Result<()> {
        if i.is_multiple_of(1024) {
            self.check(what)
        } else {
            Ok(())
        }
    }
}
