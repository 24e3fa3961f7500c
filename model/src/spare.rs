//! A spare buffer per thread, above all for samples, handed from a series' consumer back to the reader
//! of the next series: the query engine folds the series of a select one at a time and
//! storage decodes each into a fresh buffer, so without this every series cost an
//! allocation of its whole sample count (a week at 30 s: 320 KiB), and glibc's search
//! for a free block that size was 3–4 % of a billion-sample query's profile. Reader and
//! consumer run on the thread that pulls the stream; a buffer given back on another
//! thread simply serves that thread's next reader.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::Sample;

/// One thread's spare buffer of `T`s (declare it with `thread_local!` and a `const`
/// initialiser of `RefCell::new(Vec::new())`).
pub type Spare<T> = LocalKey<RefCell<Vec<T>>>;

/// An empty buffer with room for at least `capacity` items: the spare in `key` if it is
/// big enough, else a new one (growing a smaller spare would copy its old bytes for
/// nothing; it stays for a later, smaller take).
pub fn take<T: 'static>(key: &'static Spare<T>, capacity: usize) -> Vec<T> {
    key.with(|s| {
        let mut s = s.borrow_mut();
        if capacity > 0 && s.capacity() >= capacity {
            let mut v = std::mem::take(&mut *s);
            v.clear();
            v
        } else {
            Vec::with_capacity(capacity)
        }
    })
}

/// Keeps `v` (its contents dropped) as the spare in `key` if it is bigger than the one
/// kept and holds at most `max` items, so that an idle thread pins little.
pub fn give<T: 'static>(key: &'static Spare<T>, v: Vec<T>, max: usize) {
    if v.capacity() == 0 || v.capacity() > max {
        return;
    }
    key.with(|s| {
        let mut s = s.borrow_mut();
        if v.capacity() > s.capacity() {
            *s = v;
        }
    });
}

/// The largest sample buffer kept (in samples): 8 MiB.
const MAX_KEPT: usize = 512 * 1024;

thread_local! {
    static SAMPLES: RefCell<Vec<Sample>> = const { RefCell::new(Vec::new()) };
}

/// [`take`] of this thread's spare sample buffer.
pub fn take_samples(capacity: usize) -> Vec<Sample> {
    take(&SAMPLES, capacity)
}

/// [`give`] of a sample buffer (at most 8 MiB is kept).
pub fn give_samples(v: Vec<Sample>) {
    give(&SAMPLES, v, MAX_KEPT);
}

/// A buffer that is given back ([`give_samples`]) when dropped, on whichever path its
/// owner returns.
pub struct GiveBack(pub Vec<Sample>);

impl Drop for GiveBack {
    fn drop(&mut self) {
        give_samples(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_serves_the_next_take_on_the_same_thread() {
        // Capacities tell the buffers apart (a fresh `Vec::with_capacity(n)` of samples
        // has exactly n; addresses do not: malloc hands a freed block out again).
        let mut v = take_samples(1000);
        v.push(Sample::new(1, 1.0));
        give_samples(v);
        let again = take_samples(900);
        assert!(again.is_empty(), "handed out empty");
        assert_eq!(again.capacity(), 1000, "the buffer given back");
        // Too small a spare is not grown (that would copy its bytes): a new one is made,
        // and the spare stays for a later, smaller take.
        give_samples(again);
        assert_eq!(take_samples(5000).capacity(), 5000);
        assert_eq!(take_samples(10).capacity(), 1000);
        // Another thread has its own spare.
        give_samples(Vec::with_capacity(2000));
        let other = std::thread::spawn(|| take_samples(10).capacity()).join().expect("thread");
        assert_eq!(other, 10, "not this thread's spare");
        // The bigger of two is kept; buffers too big to pin are dropped.
        give_samples(Vec::with_capacity(1500));
        give_samples(Vec::with_capacity(MAX_KEPT + 1));
        assert_eq!(take_samples(1).capacity(), 2000);
    }
}
