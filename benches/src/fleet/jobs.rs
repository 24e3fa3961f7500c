//! Jobs and their pods: what runs on the GPUs, and how hard it drives them.
//!
//! A job owns one or more pods; a pod holds some GPUs of one node. The pod's name,
//! namespace and container become labels of every DCGM series of its GPUs, so each
//! job start creates new series and each job end makes series stale: that is the
//! label churn a GPU cluster's TSDB lives with.

use bytes::Bytes;

use super::catalog::JobKind;
use crate::rng::Rng;

/// One workload, from start to end.
#[derive(Debug)]
pub struct Job {
    pub kind: JobKind,
    /// `label_training_job` on `kube_pod_labels`; also the pod name prefix.
    pub name: Bytes,
    pub start_ms: i64,
    /// When the job ends (crashes included); pods go away at the first round at or
    /// after it.
    pub end_ms: i64,
    /// The job dies with an XID instead of finishing.
    pub crashes: bool,
    /// Steady-state intensity in [0, 1] (fraction of the GPU kept busy).
    pub base: f64,
    /// Fraction of busy time the tensor cores are active.
    pub tensor_frac: f64,
    /// Framebuffer the job allocates per GPU, in MiB.
    pub footprint_mib: f64,
    /// Mean training step duration in seconds (training jobs' histogram).
    pub step_mean_s: f64,
    /// Job-wide intensity multiplier for the current round, set by `advance`.
    pub level: f64,
    /// Seconds of checkpoint stall inside the current round (0 outside checkpoints).
    pub stall_s: f64,
    next_ckpt_ms: i64,
    ckpt_until_ms: i64,
    notebook_on: bool,
    pub pods: Vec<u64>,
}

/// One pod of a job, on one node.
#[derive(Debug)]
pub struct Pod {
    pub job: u64,
    pub name: Bytes,
    pub namespace: Bytes,
    pub container: Bytes,
    pub node: usize,
    pub gpus: Vec<usize>,
}

impl Job {
    /// A new job of `kind` starting at `now_ms`, with a lifetime drawn around
    /// `mean_job_ms` (scaled per kind: pretraining runs far longer than an eval).
    pub fn new(kind: JobKind, serial: u64, now_ms: i64, mean_job_ms: f64, rng: &mut Rng) -> Job {
        let scale = match kind {
            JobKind::Pretrain => 8.0,
            JobKind::Finetune => 2.0,
            JobKind::Notebook => 1.0,
            JobKind::Inference => 50.0,
            JobKind::Eval => 0.5,
        };
        // At least two minutes: a job shorter than a few scrapes is noise, not a job.
        let life_ms = rng.exp(mean_job_ms * scale).max(120_000.0) as i64;
        let crashes = kind != JobKind::Inference && rng.chance(0.06);
        let end_ms =
            if crashes { now_ms + ((life_ms as f64) * rng.range_f64(0.1, 1.0)) as i64 } else { now_ms + life_ms };
        let (base, tensor_frac, footprint, step) = match kind {
            JobKind::Pretrain => (
                rng.range_f64(0.93, 0.98),
                rng.range_f64(0.55, 0.8),
                rng.range_f64(70_000.0, 79_000.0),
                rng.range_f64(0.8, 3.0),
            ),
            JobKind::Finetune => (
                rng.range_f64(0.6, 0.9),
                rng.range_f64(0.35, 0.65),
                rng.range_f64(30_000.0, 75_000.0),
                rng.range_f64(0.3, 1.5),
            ),
            JobKind::Notebook => {
                (rng.range_f64(0.3, 0.8), rng.range_f64(0.1, 0.4), rng.range_f64(4_000.0, 40_000.0), 0.0)
            }
            JobKind::Inference => (0.0, rng.range_f64(0.3, 0.6), rng.range_f64(20_000.0, 60_000.0), 0.0),
            JobKind::Eval => (rng.range_f64(0.5, 0.8), rng.range_f64(0.3, 0.6), rng.range_f64(10_000.0, 50_000.0), 0.0),
        };
        let word = rng.pick(&super::catalog::JOB_WORDS);
        let name = format!(
            "{}-{}-{:05x}",
            kind.prefix(),
            word,
            (serial.wrapping_mul(0x9E37_79B9) ^ rng.next_u64()) & 0xf_ffff
        );
        Job {
            kind,
            name: Bytes::from(name),
            start_ms: now_ms,
            end_ms,
            crashes,
            base,
            tensor_frac,
            footprint_mib: footprint,
            step_mean_s: step,
            level: 0.0,
            stall_s: 0.0,
            next_ckpt_ms: now_ms + (rng.range_f64(20.0, 45.0) * 60_000.0) as i64,
            ckpt_until_ms: 0,
            notebook_on: true,
            pods: Vec::new(),
        }
    }

    /// Moves the job-wide state to the round starting at `now_ms` (`dt_ms` long):
    /// checkpoints, notebook bursts, the diurnal serving curve, the start-up ramp.
    pub fn advance(&mut self, now_ms: i64, dt_ms: i64, rng: &mut Rng) {
        self.stall_s = 0.0;
        let level = match self.kind {
            JobKind::Pretrain | JobKind::Finetune => {
                // Checkpoints stall every worker at once for 1-2.5 minutes, every
                // 20-45 minutes: the periodic dips seen on real training dashboards.
                if now_ms >= self.next_ckpt_ms {
                    self.ckpt_until_ms = now_ms + (rng.range_f64(60.0, 150.0) * 1000.0) as i64;
                    self.next_ckpt_ms = now_ms + (rng.range_f64(20.0, 45.0) * 60_000.0) as i64;
                }
                if now_ms < self.ckpt_until_ms {
                    self.stall_s = (dt_ms.min(self.ckpt_until_ms - now_ms)) as f64 / 1000.0;
                    0.04
                } else if rng.chance(0.015) {
                    // A data-loader stall: the GPUs wait for input for a scrape.
                    0.35
                } else {
                    self.base
                }
            }
            JobKind::Notebook => {
                // Two-state burst model: someone runs a cell, then reads the output.
                let flip = if self.notebook_on { 0.12 } else { 0.06 };
                if rng.chance(flip) {
                    self.notebook_on = !self.notebook_on;
                }
                if self.notebook_on {
                    self.base
                } else {
                    0.0
                }
            }
            JobKind::Inference => {
                // Traffic peaks in the (UTC) afternoon: a 24 h sine between 0.2 and 0.75.
                let day = (now_ms as f64 / 86_400_000.0).fract();
                0.2 + 0.55 * (0.5 + 0.5 * (2.0 * std::f64::consts::PI * (day - 0.35)).sin())
            }
            JobKind::Eval => self.base,
        };
        // Model loading: the first two minutes barely touch the SMs.
        self.level = if now_ms - self.start_ms < 120_000 { level.min(0.1) } else { level };
    }
}
