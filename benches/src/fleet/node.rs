//! The host side of a GPU node, as node-exporter reports it: per-CPU mode counters,
//! load average, memory and network. This is the non-GPU share of a real fleet's
//! series (node-exporter on a 16-core slice exposes 128 `node_cpu_seconds_total`).

use super::catalog::CPU_MODES;
use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct HostState {
    /// `node_cpu_seconds_total`, [cpu][mode] in `CPU_MODES` order, in seconds.
    pub cpu_seconds: Vec<[f64; CPU_MODES.len()]>,
    pub load1: f64,
    pub mem_available: f64,
    pub mem_total: f64,
    pub net_rx: f64,
    pub net_tx: f64,
}

impl HostState {
    pub fn new(cpus: usize, rng: &mut Rng) -> Self {
        let uptime = rng.range_f64(86_400.0, 30.0 * 86_400.0);
        let cpu_seconds = (0..cpus)
            .map(|_| {
                let mut m = [0.0; CPU_MODES.len()];
                // Spread the uptime over modes roughly as a busy node would have.
                let shares = [0.55, 0.01, 0.002, 0.001, 0.01, 0.0, 0.08, 0.347];
                for (k, s) in shares.iter().enumerate() {
                    m[k] = (uptime * s * rng.range_f64(0.9, 1.1) * 100.0).round() / 100.0;
                }
                m
            })
            .collect();
        HostState {
            cpu_seconds,
            load1: 1.0,
            mem_total: 2_163_456_000_000.0,
            mem_available: 1_500_000_000_000.0,
            net_rx: rng.range_f64(1e12, 1e14).round(),
            net_tx: rng.range_f64(1e12, 1e14).round(),
        }
    }

    pub fn reset_counters(&mut self) {
        for c in &mut self.cpu_seconds {
            *c = [0.0; CPU_MODES.len()];
        }
        self.net_rx = 0.0;
        self.net_tx = 0.0;
    }

    /// Advances `dt_s` seconds with the node's GPUs at mean intensity `gpu_busy`:
    /// data loaders keep CPUs busy in proportion to the GPUs they feed.
    pub fn step(&mut self, gpu_busy: f64, dt_s: f64, rng: &mut Rng) {
        let busy = (0.04 + 0.55 * gpu_busy).clamp(0.0, 0.98);
        for cpu in &mut self.cpu_seconds {
            let b = (busy * rng.range_f64(0.85, 1.15)).min(0.99);
            // node-exporter reports USER_HZ ticks: hundredths of a second.
            let user = (dt_s * b * 0.8 * 100.0).round() / 100.0;
            let system = (dt_s * b * 0.17 * 100.0).round() / 100.0;
            let softirq = (dt_s * b * 0.02 * 100.0).round() / 100.0;
            let iowait = if rng.chance(0.1) { 0.01 * rng.below(20) as f64 } else { 0.0 };
            let idle = ((dt_s - user - system - softirq - iowait).max(0.0) * 100.0).round() / 100.0;
            // Mode order: idle, iowait, irq, nice, softirq, steal, system, user.
            cpu[0] += idle;
            cpu[1] += iowait;
            cpu[4] += softirq;
            cpu[6] += system;
            cpu[7] += user;
            if rng.chance(0.02) {
                cpu[2] += 0.01;
            }
        }
        // Rounding after each += keeps the counters at two decimals, as exposed.
        for cpu in &mut self.cpu_seconds {
            for v in cpu.iter_mut() {
                *v = (*v * 100.0).round() / 100.0;
            }
        }
        let cpus = self.cpu_seconds.len() as f64;
        self.load1 = ((self.load1 * 0.8 + 0.2 * busy * cpus * rng.range_f64(0.9, 1.1)) * 100.0).round() / 100.0;
        let used_frac = 0.1 + 0.5 * gpu_busy;
        self.mem_available = ((self.mem_total * (1.0 - used_frac)) / 4096.0).round() * 4096.0;
        self.net_rx += (dt_s * (5e8 * gpu_busy + 1e6) * rng.range_f64(0.8, 1.2)).round();
        self.net_tx += (dt_s * (2e8 * gpu_busy + 1e6) * rng.range_f64(0.8, 1.2)).round();
    }
}
