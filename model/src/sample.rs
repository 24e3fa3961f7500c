//! A float sample.

/// One float sample: `t` in milliseconds since the Unix epoch. Values are kept bit for
/// bit, so a staleness marker ([`crate::STALE_NAN_BITS`]) survives storage and reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t: i64,
    pub v: f64,
}

impl Sample {
    #[inline]
    pub fn new(t: i64, v: f64) -> Sample {
        Sample { t, v }
    }
}
