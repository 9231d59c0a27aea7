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
    /// The congestion control algorithms the kernel offers
    /// (`net.ipv4.tcp_available_congestion_control`).
    #[serde(default)]
    pub available_congestion_control: Vec<String>,
    /// MTU of the loopback interface.
    pub loopback_mtu: Option<u32>,
    /// The CPU's data and unified caches, e.g. "L1d 48K, L2 1024K, L3
    /// 32768K" (cpu0, from sysfs). A VM's host can change between runs, and
    /// with it the caches that decide memory-bound figures.
    #[serde(default)]
    pub caches: Option<String>,
    /// The network interfaces that are up, with their addresses and MTUs
    /// (in this process's namespace): which one a run crossed follows from
    /// its addresses.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    /// Why this host cannot read its own shapers (its qdiscs over
    /// rtnetlink), if it cannot: every verdict then misses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapers_unreadable: Option<String>,
}

/// A network interface: its name, MTU, addresses and link speed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub mtu: Option<u32>,
    pub addresses: Vec<std::net::IpAddr>,
    /// The link's speed as its driver reports it (`/sys/class/net/NAME/speed`,
    /// Mbit/s); none for virtual devices (veth, loopback, most VMs' NICs
    /// report none or -1), or where sysfs is another namespace's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbit_s: Option<u32>,
}

/// `name`'s link speed in Mbit/s, when its driver knows one.
fn speed_of(name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    read_trimmed(&format!("/sys/class/net/{name}/speed"))?
        .parse::<i64>()
        .ok()
        .filter(|&s| s > 0)
        .and_then(|s| u32::try_from(s).ok())
}

impl HostFacts {
    /// The interface holding `address`, if this host has it.
    pub fn interface_with(&self, address: std::net::IpAddr) -> Option<&Interface> {
        self.interfaces
            .iter()
            .find(|i| i.addresses.contains(&address))
    }
}

/// An interface's MTU by `SIOCGIFMTU`, which (unlike sysfs) answers for
/// this process's own network namespace.
fn mtu_of(name: &str) -> Option<u32> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= request.ifr_name.len() {
        return None;
    }
    for (slot, &b) in request.ifr_name.iter_mut().zip(bytes) {
        *slot = b as libc::c_char;
    }
    // SAFETY: a valid socket and a valid ifreq naming the interface.
    let ret = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::SIOCGIFMTU,
            &mut request,
        )
    };
    if ret != 0 {
        return None;
    }
    // SAFETY: SIOCGIFMTU filled the union's MTU member.
    Some(unsafe { request.ifr_ifru.ifru_mtu } as u32)
}

/// The interfaces that are up, each once, with every address.
fn interfaces() -> Vec<Interface> {
    let mut found: Vec<Interface> = Vec::new();
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return found;
    };
    for entry in addresses {
        if !entry.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP) {
            continue;
        }
        let address = entry.address.as_ref().and_then(|a| {
            a.as_sockaddr_in()
                .map(|v4| std::net::IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip())))
        });
        let index = match found.iter().position(|i| i.name == entry.interface_name) {
            Some(index) => index,
            None => {
                found.push(Interface {
                    mtu: mtu_of(&entry.interface_name),
                    speed_mbit_s: speed_of(&entry.interface_name),
                    name: entry.interface_name.clone(),
                    addresses: Vec::new(),
                });
                found.len() - 1
            }
        };
        if let Some(address) = address {
            found[index].addresses.push(address);
        }
    }
    found
}

/// Whether `program` is on this process's PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
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
            available_congestion_control: read_trimmed(
                "/proc/sys/net/ipv4/tcp_available_congestion_control",
            )
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
            loopback_mtu: read_trimmed("/sys/class/net/lo/mtu").and_then(|s| s.parse().ok()),
            caches: cache_sizes(),
            interfaces: interfaces(),
            shapers_unreadable: crate::measure::qdisc::read(&["lo".to_string()])
                .err()
                .map(|e| e.to_string()),
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

#[cfg(test)]
mod interface_tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_its_address_with_its_mtu() {
        let facts = HostFacts::gather();
        let lo = facts
            .interface_with("127.0.0.1".parse().unwrap())
            .expect("loopback holds 127.0.0.1");
        assert_eq!(lo.name, "lo");
        assert_eq!(
            lo.mtu,
            std::fs::read_to_string("/sys/class/net/lo/mtu")
                .ok()
                .and_then(|m| m.trim().parse().ok())
        );
        assert!(
            facts
                .interface_with("192.0.2.255".parse().unwrap())
                .is_none()
        );
    }
}
