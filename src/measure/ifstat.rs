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
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
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
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
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
                rx_dropped: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
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
nlb1a: 5 1 0 0 0 0 0 0 7 2 0 0 0 0 0 0\n\
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
    }

    #[test]
    fn reads_loopback_here() {
        assert!(InterfaceCounters::read("lo").is_some());
        assert!(InterfaceCounters::read("no-such-if").is_none());
    }
}
