//! The kernel's protocol counters: `/proc/net/netstat` (TcpExt, IpExt) and
//! `/proc/net/snmp` (Ip, Tcp, Udp).
//!
//! Both files come in pairs of lines, a header naming the counters and a line
//! of values with the same prefix (`TcpExt: DelayedACKs ...` then
//! `TcpExt: 12 ...`). The files are per network namespace: each endpoint reads
//! them in its own namespace, so on the `netns` placement each side sees its
//! own host's counters. They count every connection in the namespace, not just
//! the experiment's: on a busy loopback the deltas include other traffic.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The counters netlab reports by default, as `Group.Name`.
pub const REPORTED: &[&str] = &[
    "TcpExt.DelayedACKs",
    "TcpExt.DelayedACKLocked",
    "TcpExt.DelayedACKLost",
    "TcpExt.TCPHPHits",
    "TcpExt.TCPPureAcks",
    "TcpExt.TCPHPAcks",
    "TcpExt.TCPAutoCorking",
    "TcpExt.TCPOrigDataSent",
    "TcpExt.TCPBacklogCoalesce",
    "TcpExt.TCPRcvCoalesce",
    // The receive queue: pruned or collapsed to fit its buffer, segments
    // dropped for want of room (in the queue, the backlog, a zero
    // window), and zero windows advertised.
    "TcpExt.PruneCalled",
    "TcpExt.RcvPruned",
    "TcpExt.OfoPruned",
    "TcpExt.TCPRcvCollapsed",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPZeroWindowDrop",
    "TcpExt.TCPToZeroWindowAdv",
    "Tcp.RetransSegs",
    "Tcp.InSegs",
    "Tcp.OutSegs",
    // UDP sends dropped below the socket (a qdisc such as tbf, a full
    // device queue): the kernel counts them here and, without IP_RECVERR,
    // tells the application nothing; and datagrams dropped at a full
    // receive buffer.
    "Udp.SndbufErrors",
    "Udp.RcvbufErrors",
];

/// The [`REPORTED`] counters the kernel counts at the end that sends the
/// data of a one-way transfer (its sending, its retransmissions, the ACKs
/// it receives); the others it counts at the receiving end (segments in,
/// ACKs delayed, the receive queue, a full receive buffer). With the ends
/// in two namespaces, each is read where it is counted.
pub const AT_SENDER: &[&str] = &[
    "TcpExt.TCPAutoCorking",
    "TcpExt.TCPOrigDataSent",
    "TcpExt.TCPPureAcks",
    "TcpExt.TCPHPAcks",
    "Tcp.RetransSegs",
    "Tcp.OutSegs",
    "Udp.SndbufErrors",
];

/// Where a receiving host's IP and UDP layers drop a datagram before any
/// socket holds it: a header that fails its checksum or its checks, an
/// address not this host's, a packet shorter than its header says, a
/// discard for want of memory, a UDP checksum that fails (each one a
/// corrupted packet, since one flipped bit always fails the checksum that
/// covers it), or no socket on the port. `Udp.InErrors` less
/// `Udp.RcvbufErrors` is the UDP layer's own drops: checksum and memory
/// errors (a full socket buffer is counted per socket, by SO_RXQ_OVFL).
///
/// The `Ip6.` counters are for an IPv4 packet whose version nibble was
/// flipped from 4 to 6 on the way (a single bit): a TUN device hands it to
/// IPv6 by that nibble, which drops it as a bad header (`Ip6.InHdrErrors`,
/// seen in a namespace on 2026-12-04) or, by what the rest of the header
/// reads as, as truncated, unroutable or not its address.
pub const UDP_RECEIVE_DROPS: &[&str] = &[
    "Ip.InHdrErrors",
    "Ip.InAddrErrors",
    "Ip.InDiscards",
    "IpExt.InTruncatedPkts",
    "Udp.NoPorts",
    "Ip6.InHdrErrors",
    "Ip6.InAddrErrors",
    "Ip6.InDiscards",
    "Ip6.InNoRoutes",
    "Ip6.InTruncatedPkts",
];

/// Whether the kernel counts `name` at the data's sender ([`AT_SENDER`]).
pub fn counted_at_sender(name: &str) -> bool {
    AT_SENDER.contains(&name)
}

impl Counters {
    /// `name`'s value without its group (`TcpExt.`), as `name=value`.
    pub fn short_pairs<'a>(&'a self, keep: impl Fn(&str) -> bool + 'a) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| format!("{}={v}", k.split_once('.').map_or(k.as_str(), |(_, n)| n)))
            .collect()
    }
}

/// A set of named counters (`Group.Name` → value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters(pub BTreeMap<String, u64>);

impl Counters {
    /// Reads `/proc/net/netstat`, `/proc/net/snmp` and `/proc/net/snmp6` of
    /// the caller's namespace.
    /// A file that cannot be read contributes nothing (the record then lacks
    /// those counters rather than failing the run).
    pub fn read() -> Counters {
        Counters::read_from("/proc/net")
    }

    /// The same counters of the namespace process `pid` is in (its
    /// `/proc/PID/net`), readable from any namespace.
    pub fn read_of(pid: u32) -> Counters {
        Counters::read_from(&format!("/proc/{pid}/net"))
    }

    fn read_from(dir: &str) -> Counters {
        let mut all = Counters::default();
        for file in ["netstat", "snmp"] {
            if let Ok(text) = std::fs::read_to_string(format!("{dir}/{file}")) {
                all.0.extend(Counters::parse(&text).0);
            }
        }
        if let Ok(text) = std::fs::read_to_string(format!("{dir}/snmp6")) {
            all.0.extend(Counters::parse_snmp6(&text).0);
        }
        all
    }

    /// Parses `snmp6`'s one-counter lines (`Ip6InHdrErrors  3`) with the
    /// group split off at its `6` (`Ip6.InHdrErrors`, `Icmp6.InMsgs`,
    /// `UdpLite6.InErrors`), as the IPv4 files name theirs. Lines that do
    /// not read so are skipped.
    pub fn parse_snmp6(text: &str) -> Counters {
        Counters(
            text.lines()
                .filter_map(|line| {
                    let (name, value) = line.split_once(char::is_whitespace)?;
                    let value = value.trim().parse::<u64>().ok()?;
                    let (group, rest) = name.split_at(name.find('6')? + 1);
                    (!rest.is_empty()).then(|| (format!("{group}.{rest}"), value))
                })
                .collect(),
        )
    }

    /// Parses the header/value line pairs of either file. Lines that do not
    /// pair up are skipped; negative values (a few snmp gauges such as
    /// `Tcp.MaxConn` are -1) are left out.
    pub fn parse(text: &str) -> Counters {
        let mut counters = BTreeMap::new();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            let [header, values] = pair else { continue };
            let (Some((group, names)), Some((group2, values))) =
                (header.split_once(':'), values.split_once(':'))
            else {
                continue;
            };
            if group != group2 {
                continue;
            }
            for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                if let Ok(v) = value.parse::<u64>() {
                    counters.insert(format!("{group}.{name}"), v);
                }
            }
        }
        Counters(counters)
    }

    /// The change from `earlier` to `self` of the [`REPORTED`] counters.
    pub fn delta_reported(&self, earlier: &Counters) -> Counters {
        Counters(
            REPORTED
                .iter()
                .filter_map(|name| {
                    let now = self.0.get(*name)?;
                    let then = earlier.0.get(*name).copied().unwrap_or(0);
                    Some((name.to_string(), now.saturating_sub(then)))
                })
                .collect(),
        )
    }

    /// The datagrams the IP and UDP layers of this namespace dropped since
    /// `earlier`, each place by its counter ([`UDP_RECEIVE_DROPS`], and
    /// `Udp.InErrors` less `Udp.RcvbufErrors` as `Udp.InErrors`), only
    /// those that saw any.
    pub fn udp_receive_drops(&self, earlier: &Counters) -> BTreeMap<String, u64> {
        let delta = |name: &str| self.get(name).saturating_sub(earlier.get(name));
        let mut drops: BTreeMap<String, u64> = UDP_RECEIVE_DROPS
            .iter()
            .map(|name| (name.to_string(), delta(name)))
            .collect();
        drops.insert(
            "Udp.InErrors".into(),
            delta("Udp.InErrors").saturating_sub(delta("Udp.RcvbufErrors")),
        );
        drops.retain(|_, n| *n > 0);
        drops
    }

    /// One counter's value, zero when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "TcpExt: SyncookiesSent DelayedACKs DelayedACKLost TCPHPHits\n\
TcpExt: 0 15 2 300\n\
IpExt: InNoRoutes InOctets\n\
IpExt: 0 123456\n";
    const SNMP: &str = "Tcp: RtoAlgorithm MaxConn InSegs OutSegs RetransSegs\n\
Tcp: 1 -1 1000 900 3\n";

    #[test]
    fn parses_header_value_pairs() {
        let c = Counters::parse(NETSTAT);
        assert_eq!(c.get("TcpExt.DelayedACKs"), 15);
        assert_eq!(c.get("TcpExt.TCPHPHits"), 300);
        assert_eq!(c.get("IpExt.InOctets"), 123456);
        let s = Counters::parse(SNMP);
        assert_eq!(s.get("Tcp.InSegs"), 1000);
        assert!(!s.0.contains_key("Tcp.MaxConn"));
    }

    #[test]
    fn parses_snmp6_lines_into_groups() {
        let c = Counters::parse_snmp6(
            "Ip6InReceives                   \t242\nIp6InHdrErrors \t5\nIcmp6InType134 2\nUdpLite6InErrors 1\nbroken\nIp6 7\n",
        );
        assert_eq!(c.get("Ip6.InReceives"), 242);
        assert_eq!(c.get("Ip6.InHdrErrors"), 5);
        assert_eq!(c.get("Icmp6.InType134"), 2);
        assert_eq!(c.get("UdpLite6.InErrors"), 1);
        assert_eq!(c.0.len(), 4);
        // A flipped version nibble's drop is one of the UDP receive drops.
        let after = Counters(c.0.clone());
        let drops = after.udp_receive_drops(&Counters::default());
        assert_eq!(drops.get("Ip6.InHdrErrors"), Some(&5));
    }

    #[test]
    fn deltas_of_reported_counters() {
        let before = Counters::parse(SNMP);
        let after = Counters::parse(
            "Tcp: RtoAlgorithm MaxConn InSegs OutSegs RetransSegs\nTcp: 1 -1 1500 1000 3\n",
        );
        let d = after.delta_reported(&before);
        assert_eq!(d.get("Tcp.InSegs"), 500);
        assert_eq!(d.get("Tcp.OutSegs"), 100);
        assert_eq!(d.get("Tcp.RetransSegs"), 0);
        assert!(!d.0.contains_key("TcpExt.DelayedACKs"));
    }

    #[test]
    fn udp_receive_drops_name_each_place_and_keep_a_full_buffer_apart() {
        let header = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n";
        let before = Counters::parse(&format!(
            "{header}Udp: 10 0 5 0 5 0 0\nIp: Forwarding InHdrErrors\nIp: 1 2\n"
        ));
        let after = Counters::parse(&format!(
            "{header}Udp: 90 1 12 0 9 0 3\nIp: Forwarding InHdrErrors\nIp: 1 4\n"
        ));
        let drops = after.udp_receive_drops(&before);
        // 7 more errors, 4 of them a full buffer: 3 the UDP layer's own.
        assert_eq!(drops.get("Udp.InErrors"), Some(&3));
        assert_eq!(drops.get("Udp.NoPorts"), Some(&1));
        assert_eq!(drops.get("Ip.InHdrErrors"), Some(&2));
        assert_eq!(drops.len(), 3, "only places that dropped: {drops:?}");
    }

    #[test]
    fn this_machine_has_the_reported_counters() {
        let c = Counters::read();
        for name in [
            "TcpExt.DelayedACKs",
            "TcpExt.TCPHPHits",
            "Tcp.InSegs",
            "Tcp.OutSegs",
            "Udp.InErrors",
            "Udp.RcvbufErrors",
        ]
        .iter()
        .chain(UDP_RECEIVE_DROPS)
        {
            assert!(c.0.contains_key(*name), "{name} missing");
        }
    }

    #[test]
    fn garbage_yields_nothing_rather_than_panicking() {
        assert!(Counters::parse("x\ny: 1 2\n\n:::\n").0.is_empty());
    }
}
