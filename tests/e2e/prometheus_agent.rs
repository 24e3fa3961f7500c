//! A real Prometheus (Debian package `prometheus`) in agent mode scrapes a tiny
//! exporter served by this test and remote-writes to Tessera; the scraped samples are
//! then read back from Tessera.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{eq, Server};

/// Finds the `prometheus` binary; fails (never skips) when it is missing.
fn prometheus_binary() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("prometheus")).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates.into_iter().chain([PathBuf::from("/usr/bin/prometheus")]).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "the `prometheus` binary is required by this test and was not found; \
                 install it with `apt-get install -y prometheus` (CI does)"
        )
    })
}

/// Serves a fixed exposition on `127.0.0.1:0/metrics` from a thread; returns the port.
fn start_exporter() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind exporter");
    let port = listener.local_addr().expect("exporter addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "# HELP e2e_gpu_utilization GPU utilization in percent.\n\
                        # TYPE e2e_gpu_utilization gauge\n\
                        e2e_gpu_utilization{gpu=\"0\",UUID=\"GPU-0000\"} 42\n\
                        e2e_gpu_utilization{gpu=\"1\",UUID=\"GPU-0001\"} 97.5\n";
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes());
        }
    });
    port
}

/// Kills Prometheus when the test ends, pass or fail.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn major_version(bin: &PathBuf) -> u32 {
    let out = Command::new(bin).arg("--version").output().expect("prometheus --version");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.split("version ").nth(1).and_then(|v| v.split('.').next()).and_then(|m| m.parse().ok()).unwrap_or(2)
}

#[test]
fn real_prometheus_agent_remote_writes_scraped_samples_that_read_back() {
    let prom = prometheus_binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let exporter = start_exporter();
    let cfg = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n  - job_name: e2e\n    static_configs:\n      - targets: ['127.0.0.1:{exporter}']\n\
         remote_write:\n  - url: {}\n    metadata_config:\n      send_interval: 1s\n    queue_config:\n      batch_send_deadline: 1s\n",
        s.url("/api/v1/write")
    );
    let cfg_path = dir.path().join("prometheus.yml");
    std::fs::write(&cfg_path, cfg).expect("write prometheus config");
    let agent_flag = if major_version(&prom) >= 3 { "--agent" } else { "--enable-feature=agent" };
    let log_path = dir.path().join("prometheus.log");
    let log = std::fs::File::create(&log_path).expect("create prometheus log");
    let child = Command::new(&prom)
        .arg(agent_flag)
        .arg(format!("--config.file={}", cfg_path.display()))
        .arg(format!("--storage.agent.path={}", dir.path().join("agent").display()))
        .arg("--web.listen-address=127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start prometheus");
    let mut prom_proc = KillOnDrop(child);

    // Poll Tessera until both scraped series have arrived. The agent writes as the
    // default tenant: Debian's Prometheus 2.42 does not send `remote_write.headers`
    // (seen on the wire), so X-Scope-OrgID is tested with direct requests instead.
    let deadline = Instant::now() + Duration::from_secs(90);
    let res = loop {
        let now = crate::harness::now_ms();
        let res = s.read(vec![eq("__name__", "e2e_gpu_utilization")], now - 600_000, now + 60_000, None);
        if res.timeseries.len() == 2 && res.timeseries.iter().all(|t| !t.samples.is_empty()) {
            break res;
        }
        let prom_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Ok(Some(status)) = prom_proc.0.try_wait() {
            panic!("prometheus exited early with {status}:\n{}", prom_log());
        }
        assert!(
            Instant::now() < deadline,
            "no samples from prometheus within 90 s; got {res:?}\nprometheus log:\n{}\ntessera log:\n{}",
            prom_log(),
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let value_of = |uuid: &str| {
        let t = res
            .timeseries
            .iter()
            .find(|t| t.labels.iter().any(|l| &l.name[..] == b"UUID" && &l.value[..] == uuid.as_bytes()))
            .expect("series present");
        let has =
            |n: &str, v: &str| t.labels.iter().any(|l| &l.name[..] == n.as_bytes() && &l.value[..] == v.as_bytes());
        assert!(has("job", "e2e"), "Prometheus adds the job label");
        assert!(has("instance", &format!("127.0.0.1:{exporter}")), "Prometheus adds the instance label");
        t.samples.last().expect("a sample").value
    };
    assert_eq!(value_of("GPU-0000"), 42.0);
    assert_eq!(value_of("GPU-0001"), 97.5);
    // Prometheus' own `up` series for the target arrives too; other tenants see nothing.
    let (_, up) = s.get_json("/api/v1/series?match[]=up", None);
    assert_eq!(up["data"][0]["job"], "e2e", "{up}");
    let (_, other) = s.get_json("/api/v1/series?match[]=up", Some("someone-else"));
    assert_eq!(other["data"], serde_json::json!([]));
    // The agent sends metric metadata (TYPE/HELP) too; it is served by /api/v1/metadata.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, md) = s.get_json("/api/v1/metadata?metric=e2e_gpu_utilization", None);
        if md["data"]["e2e_gpu_utilization"][0]["type"] == "gauge" {
            assert_eq!(md["data"]["e2e_gpu_utilization"][0]["help"], "GPU utilization in percent.");
            break;
        }
        assert!(Instant::now() < deadline, "no metadata from prometheus within 60 s: {md}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
