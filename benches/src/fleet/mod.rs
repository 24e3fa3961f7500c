//! The GPU-fleet simulator: what a Prometheus agent scraping dcgm-exporter,
//! node-exporter, kube-state-metrics and the training pods of N nodes × 8 GPUs would
//! remote-write, round by round.
//!
//! It knows nothing about HTTP or protobuf: it yields samples (`Arc<Series>`,
//! timestamp, value) in scrape order. The same `FleetConfig` always yields the same
//! samples, bit for bit (the only randomness is `crate::rng`, seeded from `seed`).
//!
//! What is simulated, per round of `interval`:
//! - a scheduler that keeps ~`busy` of the GPUs allocated to jobs (multi-node
//!   pretraining, fine-tuning, notebooks, inference, evals); jobs end and new pods
//!   start, so DCGM series churn (their `pod`/`namespace`/`container` labels change);
//!   ~6 % of jobs crash and leave an XID on their GPUs for 10 minutes;
//! - node reboots (XID 79 first, then `up` = 0 for 3-10 minutes, counters restart);
//! - staleness markers exactly where Prometheus writes them: a series that was in the
//!   previous scrape of its target and is not in this one, or every series of a
//!   target that went away;
//! - per-target scrape phase (hashed, as Prometheus spreads targets) plus ± jitter.

pub mod catalog;
mod gpu;
mod jobs;
mod node;
pub mod series;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use catalog::{Dcgm, GpuModel, JobKind, A100, CPU_MODES, H100, STEP_BUCKETS};
use gpu::{GpuState, Load};
use jobs::{Job, Pod};
use node::HostState;
pub use series::{LabelsBuilder, SeriesRef};

use crate::rng::Rng;

/// Prometheus' staleness marker: a NaN with this exact bit pattern.
use tessera_model::STALE_NAN_BITS;

/// Everything that shapes a dataset. Two equal configs give identical samples.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// GPU nodes (each runs dcgm-exporter and node-exporter).
    pub nodes: usize,
    /// GPUs per node; 8 for DGX/HGX boxes.
    pub gpus_per_node: usize,
    /// Clusters the nodes are spread over (`cluster` label, one kube-state-metrics each).
    pub clusters: usize,
    pub seed: u64,
    /// Timestamp of the first round, in ms since the epoch.
    pub start_ms: i64,
    /// Length of the dataset in ms; `i64::MAX` for an endless (live) run.
    pub span_ms: i64,
    /// Scrape interval, ms.
    pub interval_ms: i64,
    /// Each scrape's timestamp moves by a uniform ± this many ms.
    pub jitter_ms: i64,
    /// CPUs per node exposed by node-exporter (8 mode series each); 0 = no node-exporter.
    pub node_cpus: usize,
    /// Fraction of GPUs the scheduler keeps allocated, 0..1.
    pub busy: f64,
    /// Mean lifetime of a notebook in minutes; other kinds scale from it (fine-tune
    /// 2×, eval 0.5×, pretraining 8×, inference 50×). Smaller = more churn.
    pub mean_job_minutes: f64,
    /// Reboots per node per hour.
    pub reboot_rate: f64,
    /// Emit kube-state-metrics pod series (`kube_pod_labels`, resource requests).
    pub kube: bool,
    /// Emit training pods' step-duration histograms.
    pub training_histograms: bool,
    /// The DCGM fields each GPU exposes (dcgm-exporter's counters file); every field
    /// of `Dcgm::ALL` by default. Fewer fields = fewer series per GPU, same dynamics.
    pub dcgm_fields: Vec<Dcgm>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            nodes: 10,
            gpus_per_node: 8,
            clusters: 2,
            seed: 1,
            start_ms: 1_764_460_800_000, // 2025-11-30T00:00:00Z
            span_ms: 3_600_000,
            interval_ms: 30_000,
            jitter_ms: 5,
            node_cpus: 16,
            busy: 0.75,
            mean_job_minutes: 60.0,
            reboot_rate: 0.01,
            kube: true,
            training_histograms: true,
            dcgm_fields: Dcgm::ALL.to_vec(),
        }
    }
}

impl FleetConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("--nodes must be at least 1".into());
        }
        if self.gpus_per_node == 0 || self.gpus_per_node > 16 {
            return Err("--gpus-per-node must be 1..=16".into());
        }
        if self.clusters == 0 || self.clusters > 50 {
            return Err("--clusters must be 1..=50".into());
        }
        if self.interval_ms < 1000 {
            return Err("--interval must be at least 1s".into());
        }
        // Jitter bigger than a quarter interval could reorder one series' samples.
        if self.jitter_ms < 0 || self.jitter_ms * 4 >= self.interval_ms {
            return Err("--jitter-ms must be >= 0 and below a quarter of the interval".into());
        }
        if self.span_ms <= 0 {
            return Err("--span must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.busy) {
            return Err("--busy must be within 0..1".into());
        }
        if !(self.mean_job_minutes >= 1.0) {
            return Err("--mean-job-minutes must be at least 1".into());
        }
        if !(self.reboot_rate >= 0.0) {
            return Err("--reboot-rate must be >= 0".into());
        }
        if self.dcgm_fields.is_empty() {
            return Err("--dcgm-fields must name at least one field".into());
        }
        Ok(())
    }

    /// Number of scrape rounds in the span (`None` when endless).
    pub fn rounds(&self) -> Option<u64> {
        if self.span_ms == i64::MAX {
            return None;
        }
        Some(((self.span_ms + self.interval_ms - 1) / self.interval_ms) as u64)
    }
}

/// One scraped value, as it goes into a remote-write request.
#[derive(Debug, Clone)]
pub struct Sample {
    pub series: SeriesRef,
    pub ts: i64,
    pub value: f64,
}

impl Sample {
    pub fn is_stale_marker(&self) -> bool {
        tessera_model::is_stale_nan(self.value)
    }
}

/// Event counts, for the report and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FleetStats {
    pub rounds: u64,
    pub samples: u64,
    pub stale_markers: u64,
    pub jobs_started: u64,
    pub jobs_crashed: u64,
    pub reboots: u64,
    pub series_created: u64,
}

struct Gpu {
    state: GpuState,
    uuid: Bytes,
    index: usize,
    pod: Option<u64>,
    /// This GPU's DCGM series for its current pod: (index into `Dcgm::ALL` and
    /// `GpuState::values`, series), one per configured field.
    series: Vec<(usize, SeriesRef)>,
    /// Intensity of the last scrape, 0..1 (node-exporter's CPU load follows it).
    last_intensity: f64,
}

struct Node {
    hostname: Bytes,
    cluster: usize,
    ip: String,
    model: &'static GpuModel,
    gpus: Vec<Gpu>,
    host: HostState,
    host_series: Vec<SeriesRef>,
    rng: Rng,
    /// The node is down in [down_from_ms, down_until_ms); i64::MAX when healthy.
    down_from_ms: i64,
    down_until_ms: i64,
}

impl Node {
    fn is_down(&self, now_ms: i64) -> bool {
        now_ms >= self.down_from_ms && now_ms < self.down_until_ms
    }
    fn usable(&self) -> bool {
        self.down_from_ms == i64::MAX
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetKind {
    Dcgm(usize),
    Host(usize),
    Ksm(usize),
    Training(u64),
}

struct Target {
    kind: TargetKind,
    /// Offset of this target's scrapes inside the interval, ms.
    phase_ms: i64,
    /// job, instance, cluster.
    labels: Vec<(Bytes, Bytes)>,
    up: SeriesRef,
    /// Series of the previous successful scrape, for staleness markers.
    prev: Vec<SeriesRef>,
    /// The target went away: its next scrape writes stale markers, then it is dropped.
    gone: bool,
    rng: Rng,
}

/// Extra per-pod series state: kube-state-metrics and the training histogram.
struct PodSeries {
    ksm: Vec<SeriesRef>,
    /// Buckets (cumulative, in `STEP_BUCKETS` order), then `_sum`, then `_count`.
    hist: Vec<SeriesRef>,
    hist_values: Vec<f64>,
}

/// The simulator. Call [`Fleet::next_round`] until it returns false.
pub struct Fleet {
    cfg: FleetConfig,
    round: u64,
    clusters: Vec<Bytes>,
    nodes: Vec<Node>,
    jobs: BTreeMap<u64, Job>,
    pods: BTreeMap<u64, Pod>,
    pod_series: BTreeMap<u64, PodSeries>,
    targets: BTreeMap<u64, Target>,
    next_job: u64,
    next_pod: u64,
    next_target: u64,
    sched: Rng,
    stats: FleetStats,
}

const CLUSTER_NAMES: [&str; 4] = ["us-east-train", "us-west-train", "eu-central-train", "ap-south-train"];

fn cluster_name(i: usize) -> String {
    match CLUSTER_NAMES.get(i) {
        Some(n) => (*n).to_string(),
        None => format!("cluster-{i}"),
    }
}

impl Fleet {
    pub fn new(cfg: FleetConfig) -> Result<Fleet, String> {
        cfg.validate()?;
        let clusters: Vec<Bytes> = (0..cfg.clusters).map(|i| Bytes::from(cluster_name(i))).collect();
        let mut fleet = Fleet {
            round: 0,
            clusters,
            nodes: Vec::with_capacity(cfg.nodes),
            jobs: BTreeMap::new(),
            pods: BTreeMap::new(),
            pod_series: BTreeMap::new(),
            targets: BTreeMap::new(),
            next_job: 0,
            next_pod: 0,
            next_target: 0,
            sched: Rng::derive(cfg.seed, "scheduler"),
            stats: FleetStats::default(),
            cfg,
        };
        for i in 0..fleet.cfg.nodes {
            fleet.add_node(i);
        }
        for c in 0..fleet.cfg.clusters {
            if fleet.cfg.kube {
                let instance = format!("10.{}.255.10:8080", c);
                fleet.add_target(TargetKind::Ksm(c), "kube-state-metrics", instance, c);
            }
        }
        // The fleet was busy before the dataset starts: fill it, with the initial jobs
        // already past their start-up ramp.
        let t0 = fleet.cfg.start_ms;
        fleet.fill(t0, t0 - 600_000);
        Ok(fleet)
    }

    pub fn stats(&self) -> &FleetStats {
        &self.stats
    }

    /// Timestamp of the next round's start.
    pub fn next_round_start(&self) -> i64 {
        self.cfg.start_ms + self.round as i64 * self.cfg.interval_ms
    }

    fn add_node(&mut self, i: usize) {
        let cluster = i % self.cfg.clusters;
        let hostname = format!("gpu-{}-{:05}", &cluster_name(cluster)[..2], i);
        let mut rng = Rng::derive(self.cfg.seed, &hostname);
        // 70 % H100 / 30 % A100, fixed per node.
        let model = if rng.chance(0.7) { &H100 } else { &A100 };
        let ip = format!("10.{}.{}.{}", cluster, (i / 250) % 250, i % 250 + 1);
        let hostname = Bytes::from(hostname);
        let mut gpus = Vec::with_capacity(self.cfg.gpus_per_node);
        for g in 0..self.cfg.gpus_per_node {
            let r = [rng.next_u64(), rng.next_u64()];
            let uuid = format!(
                "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                r[0] >> 32,
                (r[0] >> 16) & 0xffff,
                r[0] & 0xffff,
                r[1] >> 48,
                r[1] & 0xffff_ffff_ffff
            );
            gpus.push(Gpu {
                state: GpuState::new(&mut rng),
                uuid: Bytes::from(uuid),
                index: g,
                pod: None,
                series: Vec::new(),
                last_intensity: 0.0,
            });
        }
        let host = HostState::new(self.cfg.node_cpus, &mut rng);
        let node_idx = self.nodes.len();
        self.nodes.push(Node {
            hostname,
            cluster,
            ip: ip.clone(),
            model,
            gpus,
            host,
            host_series: Vec::new(),
            rng,
            down_from_ms: i64::MAX,
            down_until_ms: i64::MAX,
        });
        for g in 0..self.cfg.gpus_per_node {
            self.rebuild_gpu_series(node_idx, g);
        }
        self.add_target(TargetKind::Dcgm(node_idx), "dcgm-exporter", format!("{ip}:9400"), cluster);
        if self.cfg.node_cpus > 0 {
            let t = self.add_target(TargetKind::Host(node_idx), "node-exporter", format!("{ip}:9100"), cluster);
            let base = self.targets[&t].labels.clone();
            let mut series = Vec::with_capacity(self.cfg.node_cpus * CPU_MODES.len() + 5);
            for cpu in 0..self.cfg.node_cpus {
                for mode in CPU_MODES {
                    series.push(
                        LabelsBuilder::new("node_cpu_seconds_total")
                            .extend(&base)
                            .set("cpu", cpu.to_string())
                            .set("mode", mode)
                            .build(),
                    );
                }
            }
            for name in ["node_load1", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes"] {
                series.push(LabelsBuilder::new(name).extend(&base).build());
            }
            for name in ["node_network_receive_bytes_total", "node_network_transmit_bytes_total"] {
                series.push(LabelsBuilder::new(name).extend(&base).set("device", "eth0").build());
            }
            self.stats.series_created += series.len() as u64;
            self.nodes[node_idx].host_series = series;
        }
    }

    fn add_target(&mut self, kind: TargetKind, job: &'static str, instance: String, cluster: usize) -> u64 {
        let key = format!("{job}/{instance}");
        let mut rng = Rng::derive(self.cfg.seed, &key);
        // Prometheus spreads targets over the interval by a hash of the target.
        let phase_ms = (xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % self.cfg.interval_ms as u64) as i64;
        let labels = vec![
            (Bytes::from_static(b"job"), Bytes::from_static(job.as_bytes())),
            (Bytes::from_static(b"instance"), Bytes::from(instance)),
            (Bytes::from_static(b"cluster"), self.clusters[cluster].clone()),
        ];
        let up = LabelsBuilder::new("up").extend(&labels).build();
        self.stats.series_created += 1;
        let _ = rng.next_u64();
        let id = self.next_target;
        self.next_target += 1;
        self.targets.insert(id, Target { kind, phase_ms, labels, up, prev: Vec::new(), gone: false, rng });
        id
    }

    /// Rebuilds the DCGM series of one GPU after its pod changed.
    fn rebuild_gpu_series(&mut self, node_idx: usize, g: usize) {
        let node = &self.nodes[node_idx];
        let gpu = &node.gpus[g];
        let (pod, ns, container) = match gpu.pod.and_then(|p| self.pods.get(&p)) {
            Some(p) => (p.name.clone(), p.namespace.clone(), p.container.clone()),
            None => (Bytes::new(), Bytes::new(), Bytes::new()),
        };
        let base = vec![
            (Bytes::from_static(b"job"), Bytes::from_static(b"dcgm-exporter")),
            (Bytes::from_static(b"instance"), Bytes::from(format!("{}:9400", node.ip))),
            (Bytes::from_static(b"cluster"), self.clusters[node.cluster].clone()),
            (Bytes::from_static(b"gpu"), Bytes::from(gpu.index.to_string())),
            (Bytes::from_static(b"UUID"), gpu.uuid.clone()),
            (Bytes::from_static(b"device"), Bytes::from(format!("nvidia{}", gpu.index))),
            (Bytes::from_static(b"modelName"), Bytes::from_static(node.model.name.as_bytes())),
            (Bytes::from_static(b"Hostname"), node.hostname.clone()),
            (Bytes::from_static(b"pod"), pod),
            (Bytes::from_static(b"namespace"), ns),
            (Bytes::from_static(b"container"), container),
        ];
        let series: Vec<(usize, SeriesRef)> = Dcgm::ALL
            .iter()
            .enumerate()
            .filter(|(_, f)| self.cfg.dcgm_fields.contains(f))
            .map(|(k, f)| (k, LabelsBuilder::new(f.name()).extend(&base).build()))
            .collect();
        self.stats.series_created += series.len() as u64;
        self.nodes[node_idx].gpus[g].series = series;
    }

    /// Produces the next round's samples (appended to `out`, in timestamp order).
    /// Returns false, appending nothing, once the span is covered.
    pub fn next_round(&mut self, out: &mut Vec<Sample>) -> bool {
        if let Some(rounds) = self.cfg.rounds() {
            if self.round >= rounds {
                return false;
            }
        }
        let t0 = self.next_round_start();
        self.schedule(t0);

        // Scrapes of this round in time order (ties broken by target id, so the order
        // is deterministic).
        let mut order: Vec<(i64, u64)> = Vec::with_capacity(self.targets.len());
        for (&id, t) in self.targets.iter_mut() {
            let j = self.cfg.jitter_ms;
            let jitter = if j > 0 { t.rng.below((2 * j + 1) as u64) as i64 - j } else { 0 };
            order.push((t0 + t.phase_ms + jitter, id));
        }
        order.sort_unstable();
        let before = out.len();
        for (ts, id) in order {
            self.scrape(id, t0, ts, out);
        }
        self.targets.retain(|_, t| !t.gone);
        let produced = &out[before..];
        self.stats.samples += produced.len() as u64;
        self.stats.stale_markers += produced.iter().filter(|s| s.is_stale_marker()).count() as u64;
        self.stats.rounds += 1;
        self.round += 1;
        true
    }

    /// Scheduler step at the start of a round: reboots, job ends, new jobs, and the
    /// job-wide state (checkpoints, bursts) for this round.
    fn schedule(&mut self, t0: i64) {
        let interval = self.cfg.interval_ms;
        // Nodes coming back: the driver and the kernel restart every counter.
        for node in &mut self.nodes {
            if node.down_until_ms != i64::MAX && t0 >= node.down_until_ms {
                node.down_from_ms = i64::MAX;
                node.down_until_ms = i64::MAX;
                for g in &mut node.gpus {
                    g.state.reset_counters();
                }
                node.host.reset_counters();
            }
        }
        // New reboots: XID 79 ("fallen off the bus") shows in this round, the node is
        // gone from the next one.
        let p_reboot = self.cfg.reboot_rate * interval as f64 / 3_600_000.0;
        for n in 0..self.nodes.len() {
            if self.nodes[n].usable() && self.sched.chance(p_reboot) {
                let down_min = self.sched.range_f64(3.0, 10.0);
                let g = self.sched.below(self.nodes[n].gpus.len() as u64) as usize;
                let node = &mut self.nodes[n];
                node.gpus[g].state.xid = 79.0;
                node.gpus[g].state.xid_until_ms = t0 + interval;
                node.down_from_ms = t0 + interval;
                node.down_until_ms = node.down_from_ms + (down_min * 60_000.0) as i64;
                self.stats.reboots += 1;
            }
        }
        // Jobs that end now, and every job with a pod on a node that is down.
        let ending: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.end_ms <= t0
                    || j.pods.iter().any(|p| self.pods.get(p).is_some_and(|p| self.nodes[p.node].is_down(t0)))
            })
            .map(|(&id, _)| id)
            .collect();
        for id in ending {
            self.end_job(id, t0);
        }
        self.fill(t0, t0);
        let mut sched = self.sched.clone();
        for job in self.jobs.values_mut() {
            job.advance(t0, interval, &mut sched);
        }
        self.sched = sched;
    }

    fn end_job(&mut self, id: u64, t0: i64) {
        let Some(job) = self.jobs.remove(&id) else { return };
        if job.crashes && job.end_ms <= t0 {
            self.stats.jobs_crashed += 1;
        }
        for pod_id in job.pods {
            let Some(pod) = self.pods.remove(&pod_id) else { continue };
            self.pod_series.remove(&pod_id);
            for &g in &pod.gpus {
                let xid = if job.crashes { *self.sched.pick(&[13.0, 31.0, 43.0, 45.0, 94.0]) } else { 0.0 };
                let gpu = &mut self.nodes[pod.node].gpus[g];
                gpu.pod = None;
                if xid > 0.0 {
                    gpu.state.xid = xid;
                    gpu.state.xid_until_ms = t0 + 600_000;
                }
                self.rebuild_gpu_series(pod.node, g);
            }
            for t in self.targets.values_mut() {
                if t.kind == TargetKind::Training(pod_id) {
                    t.gone = true;
                }
            }
        }
    }

    /// Starts jobs until ~`busy` of the usable GPUs are allocated.
    fn fill(&mut self, t0: i64, job_start_ms: i64) {
        let usable: usize = self.nodes.iter().filter(|n| n.usable()).map(|n| n.gpus.len()).sum();
        let mut allocated: usize =
            self.nodes.iter().filter(|n| n.usable()).map(|n| n.gpus.iter().filter(|g| g.pod.is_some()).count()).sum();
        let want = (self.cfg.busy * usable as f64).round() as usize;
        let mut attempts = 0;
        while allocated < want && attempts < 40 {
            attempts += 1;
            let r = self.sched.f64();
            let kind = if r < 0.15 {
                JobKind::Pretrain
            } else if r < 0.45 {
                JobKind::Finetune
            } else if r < 0.65 {
                JobKind::Notebook
            } else if r < 0.75 {
                JobKind::Inference
            } else {
                JobKind::Eval
            };
            if let Some(n) = self.start_job(kind, t0, job_start_ms, want - allocated) {
                allocated += n;
            }
        }
    }

    /// Places one job; returns the GPUs it took, or None if it did not fit.
    fn start_job(&mut self, kind: JobKind, t0: i64, job_start_ms: i64, room: usize) -> Option<usize> {
        let per_node = self.cfg.gpus_per_node;
        // (node, gpu indices) per pod.
        let mut placement: Vec<(usize, Vec<usize>)> = Vec::new();
        if kind == JobKind::Pretrain {
            let k = *self.sched.pick(&[2usize, 4, 8]);
            if k * per_node > room {
                return None;
            }
            let cluster = self.sched.below(self.cfg.clusters as u64) as usize;
            let free: Vec<usize> = (0..self.nodes.len())
                .filter(|&n| {
                    let node = &self.nodes[n];
                    node.cluster == cluster && node.usable() && node.gpus.iter().all(|g| g.pod.is_none())
                })
                .collect();
            if free.len() < k {
                return None;
            }
            let off = self.sched.below(free.len() as u64) as usize;
            for i in 0..k {
                placement.push((free[(off + i) % free.len()], (0..per_node).collect()));
            }
        } else {
            let g = match kind {
                JobKind::Finetune => *self.sched.pick(&[1usize, 2, 4, 8]),
                JobKind::Inference => *self.sched.pick(&[1usize, 2]),
                JobKind::Eval => *self.sched.pick(&[1usize, 2, 4]),
                _ => 1,
            }
            .min(per_node);
            if g > room {
                return None;
            }
            let n_nodes = self.nodes.len();
            let off = self.sched.below(n_nodes as u64) as usize;
            let node = (0..n_nodes).map(|i| (off + i) % n_nodes).find(|&n| {
                let node = &self.nodes[n];
                node.usable() && node.gpus.iter().filter(|x| x.pod.is_none()).count() >= g
            })?;
            let gpus: Vec<usize> =
                self.nodes[node].gpus.iter().filter(|x| x.pod.is_none()).map(|x| x.index).take(g).collect();
            placement.push((node, gpus));
        }

        let job_id = self.next_job;
        self.next_job += 1;
        let mean_ms = self.cfg.mean_job_minutes * 60_000.0;
        let mut job = Job::new(kind, job_id, t0, mean_ms, &mut self.sched);
        job.start_ms = job_start_ms;
        let multi = placement.len() > 1;
        let mut taken = 0;
        for (i, (node, gpus)) in placement.into_iter().enumerate() {
            let pod_id = self.next_pod;
            self.next_pod += 1;
            let suffix =
                if multi { format!("worker-{i}") } else { format!("{:05x}", self.sched.next_u64() & 0xf_ffff) };
            let name = format!("{}-{}", String::from_utf8_lossy(&job.name), suffix);
            let cluster = self.nodes[node].cluster;
            let instance = format!("10.{}.{}.{}:9090", 100 + cluster, (pod_id / 250) % 250, pod_id % 250 + 1);
            let pod = Pod {
                job: job_id,
                name: Bytes::from(name),
                namespace: Bytes::from_static(kind.namespace().as_bytes()),
                container: Bytes::from_static(kind.container().as_bytes()),
                node,
                gpus: gpus.clone(),
            };
            let ps = self.pod_series_for(&pod, &job);
            self.pods.insert(pod_id, pod);
            self.pod_series.insert(pod_id, ps);
            for &g in &gpus {
                self.nodes[node].gpus[g].pod = Some(pod_id);
                self.rebuild_gpu_series(node, g);
            }
            if kind.trains() && self.cfg.training_histograms {
                let t = self.add_target(TargetKind::Training(pod_id), "training-metrics", instance, cluster);
                // Histogram series carry the target labels: build them now that the
                // target exists.
                let base = self.targets[&t].labels.clone();
                let pod = &self.pods[&pod_id];
                let mut hist = Vec::with_capacity(STEP_BUCKETS.len() + 2);
                let pod_labels = |b: LabelsBuilder| {
                    b.extend(&base)
                        .set("namespace", pod.namespace.clone())
                        .set("pod", pod.name.clone())
                        .set("container", pod.container.clone())
                };
                for le in STEP_BUCKETS {
                    let le = if le.is_infinite() { "+Inf".to_string() } else { format!("{le}") };
                    hist.push(
                        pod_labels(LabelsBuilder::new("training_step_duration_seconds_bucket")).set("le", le).build(),
                    );
                }
                hist.push(pod_labels(LabelsBuilder::new("training_step_duration_seconds_sum")).build());
                hist.push(pod_labels(LabelsBuilder::new("training_step_duration_seconds_count")).build());
                self.stats.series_created += hist.len() as u64;
                if let Some(ps) = self.pod_series.get_mut(&pod_id) {
                    ps.hist_values = vec![0.0; hist.len()];
                    ps.hist = hist;
                }
            }
            job.pods.push(pod_id);
            taken += gpus.len();
        }
        self.stats.jobs_started += 1;
        self.jobs.insert(job_id, job);
        Some(taken)
    }

    fn pod_series_for(&mut self, pod: &Pod, job: &Job) -> PodSeries {
        let mut ksm = Vec::new();
        if self.cfg.kube {
            let cluster = self.clusters[self.nodes[pod.node].cluster].clone();
            let instance = Bytes::from(format!("10.{}.255.10:8080", self.nodes[pod.node].cluster));
            let base = vec![
                (Bytes::from_static(b"job"), Bytes::from_static(b"kube-state-metrics")),
                (Bytes::from_static(b"instance"), instance),
                (Bytes::from_static(b"cluster"), cluster),
                (Bytes::from_static(b"namespace"), pod.namespace.clone()),
                (Bytes::from_static(b"pod"), pod.name.clone()),
            ];
            ksm.push(
                LabelsBuilder::new("kube_pod_labels")
                    .extend(&base)
                    .set("label_team", job.kind.team())
                    .set("label_app", job.kind.container())
                    .set("label_training_job", job.name.clone())
                    .build(),
            );
            ksm.push(
                LabelsBuilder::new("kube_pod_container_resource_requests")
                    .extend(&base)
                    .set("container", pod.container.clone())
                    .set("node", self.nodes[pod.node].hostname.clone())
                    .set("resource", "nvidia_com_gpu")
                    .set("unit", "integer")
                    .build(),
            );
            self.stats.series_created += ksm.len() as u64;
        }
        PodSeries { ksm, hist: Vec::new(), hist_values: Vec::new() }
    }

    /// Intensity a GPU's pod asks for this round (0 when idle).
    fn gpu_load(&self, node: usize, g: usize) -> Load {
        let Some(pod) = self.nodes[node].gpus[g].pod.and_then(|p| self.pods.get(&p)) else {
            return Load::IDLE;
        };
        let Some(job) = self.jobs.get(&pod.job) else { return Load::IDLE };
        Load {
            intensity: job.level,
            tensor_frac: job.tensor_frac,
            footprint_mib: job.footprint_mib,
            nvlink_heavy: job.kind == JobKind::Pretrain,
        }
    }

    /// Scrapes target `id` at `ts`, inside the round starting at `t0`. Up/down is
    /// decided per round (as the scheduler sees it), so a node never comes back in the
    /// middle of a round before its counters were reset.
    fn scrape(&mut self, id: u64, t0: i64, ts: i64, out: &mut Vec<Sample>) {
        let dt_s = self.cfg.interval_ms as f64 / 1000.0;
        let Some(kind) = self.targets.get(&id).map(|t| t.kind) else { return };
        let gone = self.targets[&id].gone;
        let mut cur: Vec<(SeriesRef, f64)> = Vec::new();
        let mut up = 1.0;
        if !gone {
            match kind {
                TargetKind::Dcgm(n) => {
                    if self.nodes[n].is_down(t0) {
                        up = 0.0;
                    } else {
                        let loads: Vec<Load> = (0..self.nodes[n].gpus.len()).map(|g| self.gpu_load(n, g)).collect();
                        let node = &mut self.nodes[n];
                        for (g, load) in loads.into_iter().enumerate() {
                            let gpu = &mut node.gpus[g];
                            gpu.state.step(node.model, load, ts, dt_s, &mut node.rng);
                            gpu.last_intensity = load.intensity;
                            for (k, s) in &gpu.series {
                                cur.push((s.clone(), gpu.state.values[*k]));
                            }
                        }
                    }
                }
                TargetKind::Host(n) => {
                    let node = &mut self.nodes[n];
                    if node.is_down(t0) {
                        up = 0.0;
                    } else {
                        let busy = node.gpus.iter().map(|g| g.last_intensity).sum::<f64>() / node.gpus.len() as f64;
                        node.host.step(busy, dt_s, &mut node.rng);
                        let h = &node.host;
                        let mut values: Vec<f64> = h.cpu_seconds.iter().flat_map(|c| c.iter().copied()).collect();
                        values.extend([h.load1, h.mem_available, h.mem_total, h.net_rx, h.net_tx]);
                        for (s, v) in node.host_series.iter().zip(values) {
                            cur.push((s.clone(), v));
                        }
                    }
                }
                TargetKind::Ksm(c) => {
                    for (pod_id, pod) in &self.pods {
                        if self.nodes[pod.node].cluster != c {
                            continue;
                        }
                        if let Some(ps) = self.pod_series.get(pod_id) {
                            if let [labels, requests] = ps.ksm.as_slice() {
                                cur.push((labels.clone(), 1.0));
                                cur.push((requests.clone(), pod.gpus.len() as f64));
                            }
                        }
                    }
                }
                TargetKind::Training(pod_id) => self.scrape_training(pod_id, dt_s, &mut cur),
            }
        }

        let Some(t) = self.targets.get_mut(&id) else { return };
        for (s, v) in &cur {
            out.push(Sample { series: s.clone(), ts, value: *v });
        }
        let stale = f64::from_bits(STALE_NAN_BITS);
        if gone {
            out.push(Sample { series: t.up.clone(), ts, value: stale });
        } else {
            out.push(Sample { series: t.up.clone(), ts, value: up });
        }
        // Staleness: a series of the previous scrape missing from this one. The
        // common case (same series in the same order) is checked without hashing.
        let same = t.prev.len() == cur.len() && t.prev.iter().zip(&cur).all(|(a, (b, _))| a.id == b.id);
        if !same {
            let now: HashSet<u64> = cur.iter().map(|(s, _)| s.id).collect();
            for s in &t.prev {
                if !now.contains(&s.id) {
                    out.push(Sample { series: s.clone(), ts, value: stale });
                }
            }
            t.prev = cur.into_iter().map(|(s, _)| s).collect();
        }
    }

    fn scrape_training(&mut self, pod_id: u64, dt_s: f64, cur: &mut Vec<(SeriesRef, f64)>) {
        let Some(pod) = self.pods.get(&pod_id) else { return };
        let Some(job) = self.jobs.get(&pod.job) else { return };
        let node = &mut self.nodes[pod.node];
        let Some(ps) = self.pod_series.get_mut(&pod_id) else { return };
        if ps.hist.is_empty() {
            return;
        }
        let rng = &mut node.rng;
        let nb = STEP_BUCKETS.len();
        let observe = |d: f64, vals: &mut Vec<f64>| {
            for (k, le) in STEP_BUCKETS.iter().enumerate() {
                if d <= *le {
                    vals[k] += 1.0;
                }
            }
            vals[nb] += d;
            vals[nb + 1] += 1.0;
        };
        // Steps completed in this interval: none while loading, fewer while stalled.
        if job.level > 0.2 {
            let active = (dt_s - job.stall_s).max(0.0);
            let n = ((active / job.step_mean_s).floor() as usize).min(400);
            for _ in 0..n {
                let d = job.step_mean_s * (0.12 * rng.normal()).exp();
                observe(d, &mut ps.hist_values);
            }
        }
        if job.stall_s > 0.0 {
            observe(job.stall_s + job.step_mean_s, &mut ps.hist_values);
        }
        // The sum is exposed as a float; keep it at millisecond precision.
        ps.hist_values[nb] = (ps.hist_values[nb] * 1000.0).round() / 1000.0;
        for (s, v) in ps.hist.iter().zip(&ps.hist_values) {
            cur.push((s.clone(), *v));
        }
    }
}
