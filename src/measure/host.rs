//! Facts about the host a measurement ran on, recorded with every result so a
//! number is never separated from the machine that produced it.

use serde::{Deserialize, Serialize};

/// The machine and network configuration in force during a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    /// True when the CPU reports the `hypervisor` flag: interrupt and device
    /// time of the real host are then invisible to this one.
    pub virtualized: bool,
    /// The system's default congestion control (`net.ipv4.tcp_congestion_control`).
    pub default_congestion_control: String,
    /// MTU of the loopback interface.
    pub loopback_mtu: Option<u32>,
    /// The CPU's data and unified caches, e.g. "L1d 48K, L2 1024K, L3
    /// 32768K" (cpu0, from sysfs). A VM's host can change between runs, and
    /// with it the caches that decide memory-bound figures.
    #[serde(default)]
    pub caches: Option<String>,
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

impl HostFacts {
    /// Gathers the facts of the machine this process runs on.
    pub fn gather() -> HostFacts {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        HostFacts {
            hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
            cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            virtualized: field("flags")
                .map(|f| f.split_whitespace().any(|x| x == "hypervisor"))
                .unwrap_or(false),
            default_congestion_control: read_trimmed("/proc/sys/net/ipv4/tcp_congestion_control")
                .unwrap_or_default(),
            loopback_mtu: read_trimmed("/sys/class/net/lo/mtu").and_then(|s| s.parse().ok()),
            caches: cache_sizes(),
        }
    }
}

/// cpu0's data and unified caches, in sysfs order.
fn cache_sizes() -> Option<String> {
    let caches: Vec<String> = (0..8)
        .filter_map(|i| {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let level = read_trimmed(&format!("{dir}/level"))?;
            let kind = read_trimmed(&format!("{dir}/type"))?;
            let size = read_trimmed(&format!("{dir}/size"))?;
            match kind.as_str() {
                "Instruction" => None,
                "Data" => Some(format!("L{level}d {size}")),
                _ => Some(format!("L{level} {size}")),
            }
        })
        .collect();
    (!caches.is_empty()).then(|| caches.join(", "))
}
