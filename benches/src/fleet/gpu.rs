//! One GPU's physical state and the values its DCGM fields report at each scrape.
//!
//! The dynamics aim for what makes real GPU data compress the way it does: integer
//! gauges (util, clocks, temperatures, MiB), a temperature that follows power with a
//! first-order lag, counters that only grow, constants that never change, and
//! profiling ratios printed with six decimals.

use super::catalog::{Dcgm, GpuModel, FB_RESERVED_MIB};
use crate::rng::Rng;

/// Time constant of the die temperature's response to power, in seconds.
const THERMAL_TAU_S: f64 = 90.0;
/// Ambient (inlet) temperature in °C: what an idle GPU settles to.
const AMBIENT_C: f64 = 28.0;

#[derive(Debug, Clone)]
pub struct GpuState {
    /// Die temperature in °C (continuous; reported rounded).
    temp_c: f64,
    /// Cumulative energy in millijoules since the driver started.
    energy_mj: f64,
    nvlink_tx: f64,
    nvlink_rx: f64,
    pcie_tx: f64,
    pcie_rx: f64,
    pcie_replays: f64,
    /// Last XID error code (0 = none), shown until `xid_until_ms`.
    pub xid: f64,
    pub xid_until_ms: i64,
    /// Framebuffer in use, MiB.
    fb_used: f64,
    /// Values of the current scrape, indexed like `Dcgm::ALL`.
    pub values: [f64; Dcgm::ALL.len()],
}

/// What the workload asks of the GPU during one scrape interval.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Fraction of time the GPU is busy, 0..1 (before per-GPU noise).
    pub intensity: f64,
    pub tensor_frac: f64,
    /// Framebuffer the workload wants, MiB (0 when idle).
    pub footprint_mib: f64,
    /// Multi-node jobs drive NVLink much harder than single-GPU ones.
    pub nvlink_heavy: bool,
}

impl Load {
    pub const IDLE: Load = Load { intensity: 0.0, tensor_frac: 0.0, footprint_mib: 0.0, nvlink_heavy: false };
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

impl GpuState {
    pub fn new(rng: &mut Rng) -> Self {
        GpuState {
            temp_c: AMBIENT_C + rng.range_f64(0.0, 4.0),
            // A driver that has been up for a while: counters do not start at zero.
            energy_mj: rng.range_f64(1e9, 5e10).round(),
            nvlink_tx: rng.range_f64(1e12, 1e14).round(),
            nvlink_rx: rng.range_f64(1e12, 1e14).round(),
            pcie_tx: rng.range_f64(1e11, 1e13).round(),
            pcie_rx: rng.range_f64(1e11, 1e13).round(),
            pcie_replays: rng.below(3) as f64,
            xid: 0.0,
            xid_until_ms: 0,
            fb_used: 0.0,
            values: [0.0; Dcgm::ALL.len()],
        }
    }

    /// The driver restarted (node reboot): counters start again from zero.
    pub fn reset_counters(&mut self) {
        self.energy_mj = 0.0;
        self.nvlink_tx = 0.0;
        self.nvlink_rx = 0.0;
        self.pcie_tx = 0.0;
        self.pcie_rx = 0.0;
        self.pcie_replays = 0.0;
        self.temp_c = AMBIENT_C;
        self.fb_used = 0.0;
    }

    /// Advances the GPU by `dt_s` seconds under `load` and fills `values`.
    pub fn step(&mut self, model: &GpuModel, load: Load, now_ms: i64, dt_s: f64, rng: &mut Rng) {
        let busy = load.intensity > 0.0;
        let i = if busy { (load.intensity + 0.02 * rng.normal()).clamp(0.0, 1.0) } else { 0.0 };
        let util = (100.0 * i + if busy { 1.5 * rng.normal() } else { 0.0 }).round().clamp(0.0, 100.0);

        // Power: idle floor plus a share of the headroom; never above the limit.
        let power = if busy {
            (model.idle_w + (model.tdp_w - model.idle_w) * (0.12 + 0.88 * i) + 6.0 * rng.normal())
                .clamp(model.idle_w * 0.9, model.tdp_w)
        } else {
            model.idle_w + 1.5 * rng.normal()
        };
        let power = round_to(power, 3);

        // First-order lag towards a steady temperature proportional to power.
        let target_c = AMBIENT_C + 52.0 * power / model.tdp_w;
        self.temp_c += (target_c - self.temp_c) * (1.0 - (-dt_s / THERMAL_TAU_S).exp());
        let mem_temp = self.temp_c + 6.0 + 0.4 * rng.normal();

        self.energy_mj += (power * dt_s * 1000.0).round();
        // Bytes/s at full intensity: ~60 GB/s each way on NVLink for multi-node
        // training (all-reduce), far less otherwise; PCIe ~2 GB/s of input data.
        let nvlink_rate = if load.nvlink_heavy { 60e9 } else { 2e9 } * i;
        self.nvlink_tx += (nvlink_rate * dt_s * rng.range_f64(0.9, 1.1)).round();
        self.nvlink_rx += (nvlink_rate * dt_s * rng.range_f64(0.9, 1.1)).round();
        self.pcie_tx += (0.3e9 * i * dt_s * rng.range_f64(0.8, 1.2)).round() + 4096.0;
        self.pcie_rx += (2.0e9 * i * dt_s * rng.range_f64(0.8, 1.2)).round() + 8192.0;
        if rng.chance(0.0005) {
            self.pcie_replays += 1.0;
        }
        if now_ms >= self.xid_until_ms {
            self.xid = 0.0;
        }

        // Framebuffer: the allocation grows to the footprint within a scrape or two
        // (PyTorch's caching allocator), then jitters by a few MiB.
        let want = load.footprint_mib;
        self.fb_used = if want > 0.0 {
            let grown = (self.fb_used + want * 0.6).min(want);
            (grown + 8.0 * rng.normal()).round().max(0.0)
        } else {
            0.0
        };
        let fb_free = (model.fb_mib - FB_RESERVED_MIB - self.fb_used).max(0.0);

        // Clocks: boost while busy, throttled a step when hot; idle clock otherwise.
        let sm_clock = if busy {
            if self.temp_c > 78.0 {
                model.sm_boost_mhz - 225.0
            } else {
                model.sm_boost_mhz
            }
        } else {
            model.sm_idle_mhz
        };

        let gr = if busy { (i + 0.01 * rng.normal()).clamp(0.0, 1.0) } else { 0.0 };
        let v = &mut self.values;
        for (k, field) in Dcgm::ALL.iter().enumerate() {
            v[k] = match field {
                Dcgm::GpuUtil => util,
                Dcgm::MemCopyUtil => (util * 0.35 * rng.range_f64(0.8, 1.2)).round().min(100.0),
                Dcgm::FbUsed => self.fb_used,
                Dcgm::FbFree => fb_free,
                Dcgm::SmClock => sm_clock,
                Dcgm::MemClock => model.mem_mhz,
                Dcgm::GpuTemp => self.temp_c.round(),
                Dcgm::MemoryTemp => mem_temp.round(),
                Dcgm::PowerUsage => power,
                Dcgm::PowerMgmtLimit => model.tdp_w,
                Dcgm::TotalEnergy => self.energy_mj,
                Dcgm::XidErrors => self.xid,
                Dcgm::PcieReplay => self.pcie_replays,
                Dcgm::GrEngineActive => round_to(gr, 6),
                Dcgm::SmActive => round_to(gr * 0.96, 6),
                Dcgm::SmOccupancy => round_to(gr * 0.48, 6),
                Dcgm::TensorActive => round_to(gr * load.tensor_frac, 6),
                Dcgm::DramActive => {
                    round_to((gr * 0.45 + if busy { 0.02 * rng.normal() } else { 0.0 }).clamp(0.0, 1.0), 6)
                }
                Dcgm::NvlinkTx => self.nvlink_tx,
                Dcgm::NvlinkRx => self.nvlink_rx,
                Dcgm::PcieTx => self.pcie_tx,
                Dcgm::PcieRx => self.pcie_rx,
            };
        }
    }
}
