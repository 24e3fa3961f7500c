//! Float samples whose NaN payload means something.
//!
//! Storage keeps every float bit for bit, so a NaN payload survives a round trip. Two
//! payloads are reserved:
//!
//! - [`STALE_NAN_BITS`], Prometheus' staleness marker. It is part of the wire
//!   contract: a remote-write sample with exactly these bits *is* a staleness marker
//!   (Prometheus' own receiver treats it so), so it is stored as it came.
//! - [`HISTOGRAM_MARKER_BITS`], internal to the query engine: the promqltest store uses
//!   it to stand for "a native histogram sample is here". No client may produce it, so
//!   [`canonical_float`] turns a sample that happens to carry it into an ordinary NaN at
//!   ingest, and the engine never mistakes a user's float for a histogram.

/// Bit pattern of Prometheus' staleness marker (`value.StaleNaN`).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The engine's internal "native histogram sample" marker; never stored (see the module
/// docs).
pub const HISTOGRAM_MARKER_BITS: u64 = 0x7ff0_0000_0000_0003;

/// Bits of Go's `math.NaN()`, the NaN Prometheus itself produces; what an internal
/// marker arriving from outside becomes.
pub const GO_NAN_BITS: u64 = 0x7ff8_0000_0000_0001;

/// Whether `v` is a staleness marker.
#[inline]
pub fn is_stale_nan(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// Whether any of `values` carries exactly the bits `marker` ([`STALE_NAN_BITS`] or
/// [`HISTOGRAM_MARKER_BITS`]). Both markers are NaNs and a series holds a NaN rarely, so
/// the values are first scanned for any NaN without an early exit, which the compiler
/// packs (two values per comparison); only a series with one is searched for the
/// marker's bits (a 64-bit comparison per value).
#[inline]
pub fn holds_marker(values: impl Iterator<Item = f64> + Clone, marker: u64) -> bool {
    values.clone().fold(false, |any, v| any | v.is_nan()) && { values }.any(|v| v.to_bits() == marker)
}

/// `v` as it may be stored: unchanged, except a NaN carrying an internal-only marker
/// payload, which becomes Go's ordinary NaN. The staleness marker is kept.
#[inline]
pub fn canonical_float(v: f64) -> f64 {
    if v.to_bits() == HISTOGRAM_MARKER_BITS {
        f64::from_bits(GO_NAN_BITS)
    } else {
        v
    }
}

#[cfg(test)]
mod tests;
