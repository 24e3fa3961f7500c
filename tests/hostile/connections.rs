//! Connection floods: half-open and idle connections must not make the server
//! unreachable.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::Server;

/// Opens `n` connections that each send the start of a request head and then nothing.
fn half_open(server: &Server, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr).expect("connect");
            s.write_all(b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n").expect("partial head");
            s
        })
        .collect()
}

/// True if the peer has closed the connection (read returns EOF or an error).
fn closed_by_peer(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

fn metric(server: &Server, name: &str) -> f64 {
    let text = server.http().get(server.url("/metrics")).send().expect("metrics").text().expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

#[test]
fn a_flood_of_half_open_connections_leaves_ready_metrics_and_writes_answering_within_a_second() {
    let _serial = crate::probe::serial();
    // The reproduction: 1,100 half-open connections made the server
    // unreachable. Here the cap is lower than the flood, so the flood also overflows it.
    rlimit::increase_nofile_limit(4096).expect("raise the test's open-file limit");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_config(&dir.path().join("d"), "[http]\nmax_connections = 1000\n");
    let _flood = half_open(&server, 1_100);

    for _ in 0..3 {
        crate::probe::assert_reachable(&server, "a flood of 1,100 half-open connections");
    }
    assert!(metric(&server, "tessera_http_connections") <= 1000.0, "the cap holds");
    assert!(metric(&server, "tessera_http_connections_evicted_total") >= 100.0, "idle connections made room");
}

#[test]
fn a_connection_that_never_finishes_its_request_head_is_closed_by_the_header_timeout() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_config(
        &dir.path().join("d"),
        "[http]\nheader_read_timeout_secs = 1\nidle_timeout_secs = 0\n",
    );
    let mut conns = half_open(&server, 1);
    assert!(closed_by_peer(&mut conns[0], Duration::from_secs(5)), "slow head closed");
}

#[test]
fn an_idle_keep_alive_connection_is_closed_by_the_idle_timeout() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_config(&dir.path().join("d"), "[http]\nidle_timeout_secs = 1\n");
    let mut s = TcpStream::connect(server.addr).expect("connect");
    s.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).expect("response");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    // Kept alive after the response; with nothing further sent it is closed within
    // the timeout plus one sweep.
    let t = Instant::now();
    assert!(closed_by_peer(&mut s, Duration::from_secs(5)), "idle connection closed");
    assert!(t.elapsed() >= Duration::from_millis(900), "not closed before the idle timeout");
}
