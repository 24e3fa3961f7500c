//! [`ReadSlots`]: the bound on storage reads running at once in this process, for the
//! blocking read path (PromQL selects, remote read, series, label names and values).
//!
//! Every read of one shard holds one slot while it runs. The reads come from blocking
//! threads (query threads, the blocking pool), so the slots are a plain counting
//! semaphore, not tokio's: waiting for one needs no runtime, and the wait ends when the
//! request's [`Interrupt`] fires (deadline or cancel), so a request that gave up never
//! queues for storage.
//!
//! A streamed select takes a slot per series it reads, so taking and giving back a free
//! slot is one atomic operation each, without a lock or a look at the clock (the cancel
//! flag is still looked at, so a canceled stream ends at its next series): with a
//! mutex and the interrupt checked every time, the slots were about 3 % of the CPU of a
//! query over 35,000 series on two cores (each worker's lock pulled the other's cache
//! line over). Only a reader that must wait takes the lock and waits on the condition
//! variable.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tessera_storage::Interrupt;

use super::ShardError;

/// How often a waiter looks at its cancel flag (the deadline is waited for exactly).
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// A counting semaphore of storage read slots.
pub struct ReadSlots {
    /// Slots in all.
    n: usize,
    /// Slots free right now.
    free: AtomicUsize,
    /// Readers waiting for a slot (they hold `lock` while they look and then wait on
    /// `freed`, so a slot given back after their look is announced to them).
    waiting: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
    /// The most slots ever in use at once (tests check the bound with it).
    #[cfg(test)]
    peak: AtomicUsize,
}

/// One held slot; dropping it frees the slot.
pub struct ReadSlot<'a> {
    slots: &'a ReadSlots,
}

impl ReadSlots {
    /// `n` slots (at least one).
    pub fn new(n: usize) -> ReadSlots {
        let n = n.max(1);
        ReadSlots {
            n,
            free: AtomicUsize::new(n),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
            #[cfg(test)]
            peak: AtomicUsize::new(0),
        }
    }

    /// Takes a free slot, if there is one.
    fn try_take(&self) -> Option<ReadSlot<'_>> {
        let mut free = self.free.load(Ordering::SeqCst);
        while free > 0 {
            match self.free.compare_exchange_weak(free, free - 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    #[cfg(test)]
                    self.peak.fetch_max(self.n - (free - 1), Ordering::SeqCst);
                    return Some(ReadSlot { slots: self });
                }
                Err(now) => free = now,
            }
        }
        None
    }

    /// Takes a slot, waiting for one until `stop` fires (then a timeout or canceled
    /// error naming the wait).
    pub fn acquire(&self, stop: &Interrupt) -> Result<ReadSlot<'_>, ShardError> {
        // A canceled request takes no slot; an expired deadline is left to the read's
        // own checks (the clock is read per batch of series there) unless it must wait.
        stop.check_canceled("waiting for a storage read slot").map_err(ShardError::from)?;
        if let Some(slot) = self.try_take() {
            return Ok(slot);
        }
        let mut guard = self.lock.lock();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let taken = loop {
            if let Err(e) = stop.check("waiting for a storage read slot") {
                break Err(ShardError::from(e));
            }
            if let Some(slot) = self.try_take() {
                break Ok(slot);
            }
            let mut wait = CANCEL_POLL;
            if let Some(d) = stop.deadline() {
                wait = wait.min(d.saturating_duration_since(std::time::Instant::now()));
            }
            self.freed.wait_for(&mut guard, wait);
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        taken
    }

    /// Slots held right now.
    pub fn in_use(&self) -> usize {
        self.n - self.free.load(Ordering::SeqCst)
    }

    /// The most slots ever held at once.
    #[cfg(test)]
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

impl Drop for ReadSlot<'_> {
    fn drop(&mut self) {
        let slots = self.slots;
        slots.free.fetch_add(1, Ordering::SeqCst);
        // A waiter counted itself before its last look at `free`, under the lock; taking
        // the lock here waits until it is in `wait_for`, so the notice is not lost.
        if slots.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = slots.lock.lock();
            slots.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;
