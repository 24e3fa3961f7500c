//! What the simulated exporters expose: DCGM metric names, GPU models, node-exporter
//! CPU modes, and the job kinds the scheduler runs.
//!
//! Names are the NVIDIA dcgm-exporter's (`default-counters.csv` plus the profiling
//! fields dashboards use), so queries written against a real fleet run unchanged.

/// How a DCGM field behaves; the dynamics in `gpu.rs` are chosen per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dcgm {
    GpuUtil,
    MemCopyUtil,
    FbUsed,
    FbFree,
    SmClock,
    MemClock,
    GpuTemp,
    MemoryTemp,
    PowerUsage,
    PowerMgmtLimit,
    TotalEnergy,
    XidErrors,
    PcieReplay,
    GrEngineActive,
    SmActive,
    SmOccupancy,
    TensorActive,
    DramActive,
    NvlinkTx,
    NvlinkRx,
    PcieTx,
    PcieRx,
}

impl Dcgm {
    /// Every field, in exposition order. The order matters for determinism only.
    pub const ALL: [Dcgm; 22] = [
        Dcgm::GpuUtil,
        Dcgm::MemCopyUtil,
        Dcgm::FbUsed,
        Dcgm::FbFree,
        Dcgm::SmClock,
        Dcgm::MemClock,
        Dcgm::GpuTemp,
        Dcgm::MemoryTemp,
        Dcgm::PowerUsage,
        Dcgm::PowerMgmtLimit,
        Dcgm::TotalEnergy,
        Dcgm::XidErrors,
        Dcgm::PcieReplay,
        Dcgm::GrEngineActive,
        Dcgm::SmActive,
        Dcgm::SmOccupancy,
        Dcgm::TensorActive,
        Dcgm::DramActive,
        Dcgm::NvlinkTx,
        Dcgm::NvlinkRx,
        Dcgm::PcieTx,
        Dcgm::PcieRx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dcgm::GpuUtil => "DCGM_FI_DEV_GPU_UTIL",
            Dcgm::MemCopyUtil => "DCGM_FI_DEV_MEM_COPY_UTIL",
            Dcgm::FbUsed => "DCGM_FI_DEV_FB_USED",
            Dcgm::FbFree => "DCGM_FI_DEV_FB_FREE",
            Dcgm::SmClock => "DCGM_FI_DEV_SM_CLOCK",
            Dcgm::MemClock => "DCGM_FI_DEV_MEM_CLOCK",
            Dcgm::GpuTemp => "DCGM_FI_DEV_GPU_TEMP",
            Dcgm::MemoryTemp => "DCGM_FI_DEV_MEMORY_TEMP",
            Dcgm::PowerUsage => "DCGM_FI_DEV_POWER_USAGE",
            Dcgm::PowerMgmtLimit => "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            Dcgm::TotalEnergy => "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            Dcgm::XidErrors => "DCGM_FI_DEV_XID_ERRORS",
            Dcgm::PcieReplay => "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            Dcgm::GrEngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            Dcgm::SmActive => "DCGM_FI_PROF_SM_ACTIVE",
            Dcgm::SmOccupancy => "DCGM_FI_PROF_SM_OCCUPANCY",
            Dcgm::TensorActive => "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            Dcgm::DramActive => "DCGM_FI_PROF_DRAM_ACTIVE",
            Dcgm::NvlinkTx => "DCGM_FI_PROF_NVLINK_TX_BYTES",
            Dcgm::NvlinkRx => "DCGM_FI_PROF_NVLINK_RX_BYTES",
            Dcgm::PcieTx => "DCGM_FI_PROF_PCIE_TX_BYTES",
            Dcgm::PcieRx => "DCGM_FI_PROF_PCIE_RX_BYTES",
        }
    }

    /// The field called `name`: its full metric name or the part after `DCGM_FI_DEV_` /
    /// `DCGM_FI_PROF_` (`GPU_UTIL`, `PIPE_TENSOR_ACTIVE`), any case.
    pub fn from_name(name: &str) -> Option<Dcgm> {
        let want = name.trim().to_ascii_uppercase();
        Dcgm::ALL.into_iter().find(|f| {
            let full = f.name();
            full == want
                || ["DCGM_FI_DEV_", "DCGM_FI_PROF_"].iter().any(|p| full.strip_prefix(p) == Some(want.as_str()))
        })
    }

    /// Counters only go up, except when the node reboots (the driver restarts them).
    /// Real DCGM reports the PROF byte fields as per-second rates; we make them
    /// cumulative so that `rate()` and `resets()` mean something (as the shared
    /// gpufleet.py simulator does, and as newer dcgm-exporter versions label them).
    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Dcgm::TotalEnergy | Dcgm::PcieReplay | Dcgm::NvlinkTx | Dcgm::NvlinkRx | Dcgm::PcieTx | Dcgm::PcieRx
        )
    }
}

/// One GPU model's physical constants.
#[derive(Debug)]
pub struct GpuModel {
    /// `modelName` label, as `nvidia-smi` prints it.
    pub name: &'static str,
    /// Board power limit in watts.
    pub tdp_w: f64,
    /// Power drawn when idle, in watts.
    pub idle_w: f64,
    /// Framebuffer size in MiB (FB_USED + FB_FREE + reserved).
    pub fb_mib: f64,
    /// Boost and idle SM clocks, and the (fixed) memory clock, in MHz.
    pub sm_boost_mhz: f64,
    pub sm_idle_mhz: f64,
    pub mem_mhz: f64,
}

pub const H100: GpuModel = GpuModel {
    name: "NVIDIA H100 80GB HBM3",
    tdp_w: 700.0,
    idle_w: 72.0,
    fb_mib: 81559.0,
    sm_boost_mhz: 1980.0,
    sm_idle_mhz: 345.0,
    mem_mhz: 2619.0,
};

pub const A100: GpuModel = GpuModel {
    name: "NVIDIA A100-SXM4-80GB",
    tdp_w: 400.0,
    idle_w: 56.0,
    fb_mib: 81920.0,
    sm_boost_mhz: 1410.0,
    sm_idle_mhz: 210.0,
    mem_mhz: 1593.0,
};

/// Framebuffer the driver keeps for itself, in MiB (neither used nor free).
pub const FB_RESERVED_MIB: f64 = 580.0;

/// node-exporter's `node_cpu_seconds_total` modes.
pub const CPU_MODES: [&str; 8] = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"];

/// Buckets (seconds) of the training step-duration histogram.
pub const STEP_BUCKETS: [f64; 8] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, f64::INFINITY];

/// The kinds of workload the scheduler places; each has its own shape of utilisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// Multi-node LLM pretraining: whole nodes, steady ~95 % with checkpoint dips.
    Pretrain,
    /// Fine-tuning on 1-8 GPUs of one node.
    Finetune,
    /// Interactive notebook on one GPU: bursty.
    Notebook,
    /// Model serving (Triton): 1-2 GPUs, diurnal load, lives longer than most datasets.
    Inference,
    /// Evaluation sweeps on 1-4 GPUs, short.
    Eval,
}

impl JobKind {
    pub fn namespace(self) -> &'static str {
        match self {
            JobKind::Pretrain => "llm-pretrain",
            JobKind::Finetune => "ml-research",
            JobKind::Notebook => "notebooks",
            JobKind::Inference => "inference",
            JobKind::Eval => "ml-eval",
        }
    }

    pub fn container(self) -> &'static str {
        match self {
            JobKind::Pretrain | JobKind::Finetune => "pytorch",
            JobKind::Notebook => "jupyter",
            JobKind::Inference => "triton",
            JobKind::Eval => "eval",
        }
    }

    pub fn team(self) -> &'static str {
        match self {
            JobKind::Pretrain => "foundation",
            JobKind::Finetune | JobKind::Eval => "applied",
            JobKind::Notebook => "research",
            JobKind::Inference => "serving",
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            JobKind::Pretrain => "pretrain",
            JobKind::Finetune => "ft",
            JobKind::Notebook => "nb",
            JobKind::Inference => "triton",
            JobKind::Eval => "eval",
        }
    }

    /// Training jobs expose a step-duration histogram from their worker pods.
    pub fn trains(self) -> bool {
        matches!(self, JobKind::Pretrain | JobKind::Finetune)
    }
}

/// Words for job names, so pod names look like a real cluster's.
pub const JOB_WORDS: [&str; 12] =
    ["llama", "mistral", "vit", "whisper", "bert", "clip", "diffusion", "moe", "rlhf", "sft", "dpo", "retrieval"];
