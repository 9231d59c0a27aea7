//! A cell's CPU profile by layer (`--profile`, #17): data only; the rules
//! that sort samples into layers are `analysis::layers`.

use serde::{Deserialize, Serialize};

/// The layers a sample is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// netlab's own user-space code.
    Netlab,
    /// Any other user-space code (libc, the peer programs).
    OtherUser,
    /// System-call entry and exit, file-descriptor lookup, the VFS hop.
    Syscall,
    /// The socket layer: sendmsg/recvmsg, socket buffers, locking, wake-ups of readers.
    Socket,
    Tcp,
    /// IP, routing, netfilter hooks, ICMP.
    Ip,
    /// Devices and queueing: loopback, veth, tun, qdiscs, the receive backlog.
    Link,
    Checksum,
    /// Sealing and opening records (TLS, QUIC): ring's ciphers in netlab's
    /// user space, the kernel's crypto where kTLS seals.
    Encryption,
    /// Copies between user and kernel memory.
    Copy,
    /// Allocation and freeing (slab, pages, sk_buffs), page faults.
    Memory,
    /// The scheduler: switching, waking, run-queue accounting.
    Scheduler,
    /// Interrupts and softirq dispatch, timers.
    Interrupt,
    Idle,
    Unclassified,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Netlab => "netlab user code",
            Layer::OtherUser => "other user code",
            Layer::Syscall => "system call entry/exit",
            Layer::Socket => "socket layer",
            Layer::Tcp => "TCP",
            Layer::Ip => "IP",
            Layer::Link => "link and driver",
            Layer::Checksum => "checksum",
            Layer::Encryption => "encryption",
            Layer::Copy => "copy user<->kernel",
            Layer::Memory => "memory management",
            Layer::Scheduler => "scheduler and wake-ups",
            Layer::Interrupt => "softirq and interrupts",
            Layer::Idle => "idle",
            Layer::Unclassified => "unclassified",
        }
    }
}

/// One layer's part of the busy samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerShare {
    pub layer: Layer,
    pub samples: u64,
    /// Share of the busy (not idle) samples, 0..1.
    pub share: f64,
    /// Half-width of its 95% interval, from the binomial (1.96 · √(p(1-p)/n)).
    pub error: f64,
}

/// Samples counted by layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerTable {
    pub samples: u64,
    pub idle: u64,
    /// Busy layers, largest first.
    pub shares: Vec<LayerShare>,
    /// The leaf functions no rule matched, most sampled first (at most 10).
    pub unclassified: Vec<(String, u64)>,
}

/// One process's samples by layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessLayers {
    pub pid: u32,
    pub comm: String,
    pub table: LayerTable,
}

/// What the profile of one cell saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    /// How: the sampler and its rate.
    pub method: String,
    pub frequency_hz: u64,
    pub seconds: f64,
    pub cpus: usize,
    /// Records the kernel dropped (full ring buffers).
    pub lost: u64,
    /// Every CPU, every process.
    pub system: LayerTable,
    /// The processes with at least 5% of the busy samples, busiest first.
    pub processes: Vec<ProcessLayers>,
    /// The busy samples as folded stacks (`comm;root;...;leaf`, count),
    /// most sampled first, for the cell's flame graph.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<(String, u64)>,
    /// netlab's own most sampled user-space functions (at most 10), where
    /// its symbol table names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub netlab_functions: Vec<(String, u64)>,
}

/// What the profile report reads of a cell's own data, where its
/// experiment has it: the roles of its processes and its data path.
pub trait Profiled {
    /// The role of process `pid` in the cell (`sender`), if known.
    fn role_of(&self, _pid: u32) -> Option<&'static str> {
        None
    }

    /// The cell's data path, if it moved bulk data over TCP.
    fn data_path(&self) -> Option<DataPath> {
        None
    }
}

/// A bulk-data cell's packets, for the per-packet view of its profile.
#[derive(Debug, Clone, PartialEq)]
pub struct DataPath {
    /// Bytes per application write.
    pub record: u64,
    /// Data segments sent.
    pub segments: u64,
    pub mean_segment_bytes: f64,
    /// Segments that took the receiver's fast path (TcpExt.TCPHPHits).
    pub fast_path_hits: u64,
    /// What sets the path apart beyond its record size (`TLS 1.3,
    /// aes-128-gcm, 16K records`), empty for plain TCP: cells that differ
    /// in it are not merged.
    pub variant: String,
}
