//! Interface counters from `/proc/net/dev`, per network namespace: the
//! "net pkts in/out" columns of the source documents' vmstat tables.
//!
//! `/proc/net` follows the reading process's namespace, so an endpoint
//! inside a namespace sees that namespace's interfaces.

use serde::{Deserialize, Serialize};

/// One interface's counters (or their change over a run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    /// Frames received in error (bad CRC, too long, overrun...).
    #[serde(default)]
    pub rx_errors: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
    #[serde(default)]
    pub tx_errors: u64,
}

impl InterfaceCounters {
    /// Reads `name`'s counters in the caller's namespace.
    pub fn read(name: &str) -> Option<InterfaceCounters> {
        let text = std::fs::read_to_string("/proc/net/dev").ok()?;
        parse(&text).into_iter().find(|c| c.name == name)
    }

    /// `name`'s counters in the namespace process `pid` is in.
    pub fn read_of(pid: u32, name: &str) -> Option<InterfaceCounters> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok()?;
        parse(&text).into_iter().find(|c| c.name == name)
    }

    /// The change from `earlier` to `self`.
    pub fn since(&self, earlier: &InterfaceCounters) -> InterfaceCounters {
        InterfaceCounters {
            name: self.name.clone(),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            rx_errors: self.rx_errors.saturating_sub(earlier.rx_errors),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
            tx_errors: self.tx_errors.saturating_sub(earlier.tx_errors),
        }
    }
}

/// Parses `/proc/net/dev`: two header lines, then `name: 16 numbers` (8
/// receive counters, 8 transmit counters). Malformed lines are skipped.
pub fn parse(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|f| f.parse().ok())
                .collect::<Option<_>>()?;
            if v.len() < 16 {
                return None;
            }
            Some(InterfaceCounters {
                name: name.trim().to_string(),
                rx_bytes: v[0],
                rx_packets: v[1],
                rx_errors: v[2],
                rx_dropped: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
                tx_errors: v[10],
                tx_dropped: v[11],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo: 1000      10    0    0    0     0          0         0     2000      20    0    1    0     0       0          0\n\
nlb1a: 5 1 3 4 0 0 0 0 7 2 5 6 0 0 0 0\n\
broken: 1 2 3\n";

    #[test]
    fn parses_and_subtracts() {
        let all = parse(DEV);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].name, "lo");
        assert_eq!((all[0].rx_bytes, all[0].rx_packets), (1000, 10));
        assert_eq!(
            (all[0].tx_bytes, all[0].tx_packets, all[0].tx_dropped),
            (2000, 20, 1)
        );
        let d = all[0].since(&InterfaceCounters {
            rx_packets: 4,
            ..all[0].clone()
        });
        assert_eq!(d.rx_packets, 6);
        assert_eq!(d.tx_packets, 0);
        // errs and drop are the third and fourth of each direction's eight.
        assert_eq!(
            (
                all[1].rx_errors,
                all[1].rx_dropped,
                all[1].tx_errors,
                all[1].tx_dropped
            ),
            (3, 4, 5, 6)
        );
    }

    #[test]
    fn reads_loopback_here() {
        assert!(InterfaceCounters::read("lo").is_some());
        assert!(InterfaceCounters::read("no-such-if").is_none());
    }
}

/// An interface's link speed as its driver reports it (ethtool's "Speed").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpeed {
    pub interface: String,
    pub mbit_s: u64,
    /// The device's driver (`ETHTOOL_GDRVINFO`), where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

/// Drivers of virtual devices, whose reported speed is a nominal figure
/// (veth says 10000, tun 10) and not what they carry.
const NOMINAL: [&str; 8] = [
    "veth", "tun", "bridge", "dummy", "macvlan", "ipvlan", "vxlan", "bonding",
];

impl LinkSpeed {
    /// Whether the speed is a virtual device's nominal figure.
    pub fn nominal(&self) -> bool {
        self.driver.as_deref().is_some_and(|d| NOMINAL.contains(&d))
    }
}

/// The interface in the caller's namespace that holds `addr`.
pub fn interface_with(addr: std::net::IpAddr) -> Option<String> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let a = ifa.address?;
        let held = match addr {
            std::net::IpAddr::V4(v4) => a.as_sockaddr_in().map(|s| s.ip() == v4),
            std::net::IpAddr::V6(v6) => a.as_sockaddr_in6().map(|s| s.ip() == v6),
        };
        held.unwrap_or(false).then_some(ifa.interface_name)
    })
}

/// `interface`'s speed, Mbit/s, by the `SIOCETHTOOL` ioctl's
/// `ETHTOOL_GSET` in the caller's namespace (what `ethtool IF` prints as
/// Speed; sysfs would show the namespace it was mounted in). None when the
/// driver reports none (loopback, a link that is down) or the ioctl fails.
/// Virtual devices report a nominal figure (veth 10000, tun 10) that says
/// nothing of what the path carries: the caller says where it came from.
pub fn link_speed(interface: &str) -> Option<LinkSpeed> {
    /// `struct ethtool_cmd` (linux/ethtool.h), the legacy GSET layout.
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    /// `struct ethtool_drvinfo`.
    #[repr(C)]
    struct EthtoolDrvinfo {
        cmd: u32,
        driver: [u8; 32],
        version: [u8; 32],
        fw_version: [u8; 32],
        bus_info: [u8; 32],
        erom_version: [u8; 32],
        reserved2: [u8; 12],
        n_priv_flags: u32,
        n_stats: u32,
        testinfo_len: u32,
        eedump_len: u32,
        regdump_len: u32,
    }
    const ETHTOOL_GSET: u32 = 0x1;
    const ETHTOOL_GDRVINFO: u32 = 0x3;
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..EthtoolCmd::default()
    };
    if !ethtool(interface, (&mut cmd as *mut EthtoolCmd).cast()) {
        return None;
    }
    let speed = u32::from(cmd.speed) | (u32::from(cmd.speed_hi) << 16);
    // SPEED_UNKNOWN is -1 (0xffffffff); 0 means no link.
    if speed == 0 || speed == u32::MAX {
        return None;
    }
    // SAFETY: plain integers and byte arrays; all-zero is valid.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    let driver = ethtool(interface, (&mut info as *mut EthtoolDrvinfo).cast())
        .then(|| {
            let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
            String::from_utf8_lossy(&info.driver[..end]).into_owned()
        })
        .filter(|d| !d.is_empty());
    Some(LinkSpeed {
        interface: interface.to_string(),
        mbit_s: u64::from(speed),
        driver,
    })
}

/// One `SIOCETHTOOL` request on `interface` with `data` (an ethtool
/// command struct whose first field is its command); whether it succeeded.
fn ethtool(interface: &str, data: *mut libc::c_char) -> bool {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let name = interface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return false;
    }
    // SAFETY: an all-zero ifreq is valid; the name fits with its NUL.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, &b) in ifr.ifr_name.iter_mut().zip(name) {
        *slot = b as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data;
    let Ok(socket) =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))
    else {
        return false;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCETHTOOL with an ifreq whose data points at a live
    // ethtool command struct of the layout its command expects.
    unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) == 0 }
}

#[cfg(test)]
mod speed_tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_its_address_and_reports_no_speed() {
        let lo = interface_with(std::net::Ipv4Addr::LOCALHOST.into());
        assert_eq!(lo.as_deref(), Some("lo"));
        assert_eq!(link_speed("lo"), None);
        assert_eq!(link_speed("no-such-if0"), None);
        assert_eq!(link_speed(""), None);
        assert_eq!(interface_with("192.0.2.77".parse().unwrap()), None);
    }
}
