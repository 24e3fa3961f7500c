//! Wire types of the Prometheus remote-write (1.0 and 2.0) and remote-read protocols, and
//! of Tessera's internal ingester API (gRPC).
//!
//! This crate owns Tessera's own `.proto` schemas (under `proto/`, wire-compatible with
//! upstream `prompb`) and the prost code generated from them at build time, plus a few
//! helpers for building requests. It knows nothing else of Tessera: no storage, no
//! tenants, no HTTP. See `README.md` next to this crate for the wire format.
//!
//! Label names/values (1.0) and the symbol table (2.0) are `bytes::Bytes`, not
//! `String`: decoding a request from a `Bytes` buffer then slices it without copying,
//! and the receiver validates UTF-8 exactly once. Senders build them from `&'static
//! str` or `String` with [`prometheus::Label::new`] and [`v2::SymbolTable`].

use std::collections::HashMap;

use bytes::Bytes;

/// `prometheus.*`: remote-write 1.0 (`WriteRequest`) and remote read (`ReadRequest`,
/// `ReadResponse`, ...).
pub mod prometheus {
    include!(concat!(env!("OUT_DIR"), "/prometheus.rs"));

    impl Label {
        /// A label pair from anything that converts into `Bytes` (`&'static str`,
        /// `String`, `Vec<u8>`).
        pub fn new(name: impl Into<bytes::Bytes>, value: impl Into<bytes::Bytes>) -> Self {
            Label { name: name.into(), value: value.into() }
        }
    }
}

/// `io.prometheus.write.v2.*`: the remote-write 2.0 request.
pub mod v2 {
    include!(concat!(env!("OUT_DIR"), "/io.prometheus.write.v2.rs"));

    pub use super::SymbolTable;
}

/// `tessera.ingester.v1.*`: Tessera's internal API between distributors/queriers and
/// ingesters (messages, the tonic client `ingester_client::IngesterClient` and server
/// `ingester_server::{Ingester, IngesterServer}`). See the `.proto` file for the rules.
pub mod ingester {
    include!(concat!(env!("OUT_DIR"), "/tessera.ingester.v1.rs"));
}

/// Fully qualified name of the 1.0 message, as in `Content-Type: application/x-protobuf;proto=...`.
pub const PROTO_V1: &str = "prometheus.WriteRequest";
/// Fully qualified name of the 2.0 message.
pub const PROTO_V2: &str = "io.prometheus.write.v2.Request";
/// Content-Type a 2.0 sender uses.
pub const CONTENT_TYPE_V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
/// Content-Type a 1.0 sender uses (no `proto` parameter means 1.0).
pub const CONTENT_TYPE_V1: &str = "application/x-protobuf";

/// Builds the deduplicated `symbols` table of a 2.0 request.
///
/// Index 0 is always the empty string, as the 2.0 spec requires, so that a ref of 0
/// means "unset" (e.g. no unit). Use [`SymbolTable::get_ref`] for every string of the
/// request and [`SymbolTable::into_symbols`] for `Request::symbols`.
#[derive(Debug, Clone)]
pub struct SymbolTable {
    refs: HashMap<String, u32>,
    symbols: Vec<Bytes>,
}

impl Default for SymbolTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SymbolTable {
    pub fn new() -> Self {
        let mut refs = HashMap::new();
        refs.insert(String::new(), 0);
        SymbolTable { refs, symbols: vec![Bytes::new()] }
    }

    /// The index of `s` in the table, adding it on first use.
    pub fn get_ref(&mut self, s: &str) -> u32 {
        if let Some(&r) = self.refs.get(s) {
            return r;
        }
        // More than u32::MAX distinct strings cannot be referenced by the wire format;
        // no sane request comes near it (it would be tens of gigabytes).
        let r = u32::try_from(self.symbols.len()).expect("symbol table exceeds u32::MAX entries");
        self.symbols.push(Bytes::copy_from_slice(s.as_bytes()));
        self.refs.insert(s.to_owned(), r);
        r
    }

    /// Name/value refs for a label set, in the order given (the caller sorts by name).
    pub fn label_refs<'a>(&mut self, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u32> {
        let mut out = Vec::new();
        for (n, v) in labels {
            out.push(self.get_ref(n));
            out.push(self.get_ref(v));
        }
        out
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Never true: index 0 (the empty string) is always present.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    pub fn into_symbols(self) -> Vec<Bytes> {
        self.symbols
    }
}

#[cfg(test)]
mod tests;
