use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::HeaderValue;

use super::*;

/// A streamed (chunked) body of `chunks` chunks of `size` bytes that counts how many
/// chunks the reader pulled.
fn counted_body(chunks: usize, size: usize) -> (Body, Arc<AtomicUsize>) {
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pulled);
    let stream = futures::stream::iter((0..chunks).map(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; size]))
    }));
    (Body::from_stream(stream), pulled)
}

fn with_length(len: usize) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h
}

#[tokio::test]
async fn a_body_within_the_limit_is_returned_whole() {
    let (body, _) = counted_body(4, 250);
    let got = read_bounded(&HeaderMap::new(), body, &BodyLimit::request(1000)).await.expect("fits");
    assert_eq!(got.len(), 1000);
}

/// The sender keeps writing until it has sent everything; reading the rest first is what
/// lets it read the 413 instead of a reset.
#[tokio::test]
async fn an_oversized_streamed_body_is_drained_then_refused_with_413_naming_the_limit() {
    let (body, pulled) = counted_body(30, 100); // 3,000 bytes against 1,000
    let err = read_bounded(&HeaderMap::new(), body, &BodyLimit::request(1000)).await.expect_err("too large");
    assert_eq!(err.kind, ErrorKind::TooLarge);
    assert_eq!(err.message, "request body is larger than the limit of 1000 bytes (limits.max_request_bytes)");
    assert_eq!(pulled.load(Ordering::SeqCst), 30, "the whole body was read before answering");
}

#[tokio::test]
async fn draining_stops_at_four_times_the_limit() {
    let (body, pulled) = counted_body(1000, 100); // 100 KB against 1,000 bytes
    let err = read_bounded(&HeaderMap::new(), body, &BodyLimit::form(1000)).await.expect_err("too large");
    assert_eq!(err.kind, ErrorKind::TooLarge);
    assert!(err.message.starts_with("form body is larger than the limit of 1000 bytes"), "{}", err.message);
    let n = pulled.load(Ordering::SeqCst);
    assert!((40..=42).contains(&n), "read {n} chunks of 100 bytes; the bound is 4 x 1,000 bytes");
}

#[tokio::test]
async fn a_declared_oversized_body_is_refused_with_its_size_and_drained() {
    let (body, pulled) = counted_body(20, 100);
    let err = read_bounded(&with_length(2000), body, &BodyLimit::request(1000)).await.expect_err("too large");
    assert_eq!(
        err.message,
        "request body of 2000 bytes is larger than the limit of 1000 bytes (limits.max_request_bytes)"
    );
    assert_eq!(pulled.load(Ordering::SeqCst), 20);
}

/// A client waiting for `100 Continue` has sent nothing; a body declared beyond the drain
/// bound is not worth reading. Both are answered at once.
#[tokio::test]
async fn nothing_is_drained_for_expect_continue_or_beyond_the_drain_bound() {
    let (body, pulled) = counted_body(20, 100);
    let mut h = with_length(2000);
    h.insert(header::EXPECT, HeaderValue::from_static("100-continue"));
    read_bounded(&h, body, &BodyLimit::request(1000)).await.expect_err("too large");
    assert_eq!(pulled.load(Ordering::SeqCst), 0);
    let (body, pulled) = counted_body(20, 100);
    read_bounded(&with_length(5000), body, &BodyLimit::request(1000)).await.expect_err("too large");
    assert_eq!(pulled.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_body_that_fails_mid_read_is_400() {
    let stream = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"abc")),
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "peer reset")),
    ]);
    let err =
        read_bounded(&HeaderMap::new(), Body::from_stream(stream), &BodyLimit::form(1000)).await.expect_err("broken");
    assert_eq!(err.kind, ErrorKind::BadData);
    assert!(err.message.starts_with("cannot read form body"), "{}", err.message);
}
