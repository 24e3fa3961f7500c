//! [`ReadSlots`]: the bound on storage reads running at once in this process, for the
//! blocking read path (PromQL selects, remote read, series, label names and values).
//!
//! Every read of one shard holds one slot while it runs. The reads come from blocking
//! threads (query threads, the blocking pool), so the slots are a plain counting
//! semaphore (mutex and condition variable), not tokio's: waiting for one needs no
//! runtime, and the wait ends when the request's [`Interrupt`] fires (deadline or
//! cancel), so a request that gave up never queues for storage.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tessera_storage::Interrupt;

use super::ShardError;

/// How often a waiter looks at its cancel flag (the deadline is waited for exactly).
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// A counting semaphore of storage read slots.
pub struct ReadSlots {
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    free: usize,
    in_use: usize,
    /// The most slots ever in use at once (tests check the bound with it).
    #[cfg(test)]
    peak: usize,
}

/// One held slot; dropping it frees the slot.
pub struct ReadSlot<'a> {
    slots: &'a ReadSlots,
}

impl ReadSlots {
    /// `n` slots (at least one).
    pub fn new(n: usize) -> ReadSlots {
        ReadSlots {
            state: Mutex::new(State {
                free: n.max(1),
                in_use: 0,
                #[cfg(test)]
                peak: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// Takes a slot, waiting for one until `stop` fires (then a timeout or canceled
    /// error naming the wait).
    pub fn acquire(&self, stop: &Interrupt) -> Result<ReadSlot<'_>, ShardError> {
        let mut st = self.state.lock();
        loop {
            stop.check("waiting for a storage read slot").map_err(ShardError::from)?;
            if st.free > 0 {
                st.free -= 1;
                st.in_use += 1;
                #[cfg(test)]
                {
                    st.peak = st.peak.max(st.in_use);
                }
                return Ok(ReadSlot { slots: self });
            }
            let mut wait = CANCEL_POLL;
            if let Some(d) = stop.deadline() {
                wait = wait.min(d.saturating_duration_since(std::time::Instant::now()));
            }
            self.freed.wait_for(&mut st, wait);
        }
    }

    /// Slots held right now.
    pub fn in_use(&self) -> usize {
        self.state.lock().in_use
    }

    /// The most slots ever held at once.
    #[cfg(test)]
    pub fn peak(&self) -> usize {
        self.state.lock().peak
    }
}

impl Drop for ReadSlot<'_> {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock();
        st.free += 1;
        st.in_use -= 1;
        drop(st);
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests;
