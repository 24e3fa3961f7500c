//! DCGM-like synthetic series: what a GPU fleet's exporter produces every 15 s.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_model::Sample;

pub const SCRAPE_MS: i64 = 15_000;
pub const T0: i64 = 1_760_000_000_000;

/// The four shapes named in the storage issue.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// DCGM_FI_DEV_GPU_UTIL: integer percent, jumps between phases of a job.
    Util,
    /// DCGM_FI_DEV_GPU_TEMP: integer degrees drifting by ±1 now and then.
    Temp,
    /// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: mJ counter rising by power × 15 s.
    Energy,
    /// A constant (e.g. DCGM_FI_DEV_XID_ERRORS = 0).
    Constant,
}

pub const KINDS: [Kind; 4] = [Kind::Util, Kind::Temp, Kind::Energy, Kind::Constant];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Util => "util",
            Kind::Temp => "temp",
            Kind::Energy => "energy",
            Kind::Constant => "constant",
        }
    }
}

/// `n` samples of one series, 15 s apart with up to ±5 ms of scrape jitter.
pub fn series(kind: Kind, n: usize, seed: u64) -> Vec<Sample> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    let mut util: f64 = rng.gen_range(0..=100) as f64;
    let mut temp: f64 = rng.gen_range(35..=80) as f64;
    let mut energy: f64 = rng.gen_range(1e9..1e11f64).round();
    for i in 0..n {
        let t = T0 + i as i64 * SCRAPE_MS + rng.gen_range(-5..=5);
        let v = match kind {
            Kind::Util => {
                if rng.gen_bool(0.1) {
                    util = rng.gen_range(0..=100) as f64;
                } else if rng.gen_bool(0.5) {
                    util = (util + rng.gen_range(-2.0f64..=2.0).round()).clamp(0.0, 100.0);
                }
                util
            }
            Kind::Temp => {
                if rng.gen_bool(0.2) {
                    temp += if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
                }
                temp
            }
            Kind::Energy => {
                // 250–400 W for 15 s, in millijoules.
                energy += (rng.gen_range(250.0..400.0) * 15.0 * 1000.0f64).round();
                energy
            }
            Kind::Constant => 0.0,
        };
        out.push(Sample::new(t, v));
    }
    out
}
