//! `--mptcp`: what a Multipath TCP connection's subflows carried, path by
//! path, and why a path carried nothing where one did not.
//!
//! The shares come from the receiver where it read its subflows (each
//! subflow's `tcpi_bytes_received` at end of stream, before it closed: the
//! bytes each path delivered), else from the sender (each subflow's
//! `tcpi_bytes_acked` after the receiver closed). A path is a pair of
//! addresses; with `-P` every connection's subflows on a path add up.

use super::record::StreamResult;
use crate::endpoint::bulk::types::{EndpointReport, MptcpStats};
use crate::record::testbed::LinkFacts;
use std::net::IpAddr;

/// One path's part of the connection: sender's address, receiver's, the
/// subflows over it and the bytes they carried.
#[derive(Debug, Clone, PartialEq)]
pub struct PathShare {
    pub from: Option<IpAddr>,
    pub to: Option<IpAddr>,
    pub subflows: usize,
    pub bytes: u64,
}

/// The connection's paths from one end's view (`sending`: the sender's),
/// in the order their first subflow opened.
pub fn path_shares(stats: &MptcpStats, sending: bool) -> Vec<PathShare> {
    let mut paths: Vec<PathShare> = Vec::new();
    for subflow in &stats.subflows {
        let (local, remote) = (
            subflow.local.map(|a| a.ip()),
            subflow.remote.map(|a| a.ip()),
        );
        let (from, to) = if sending {
            (local, remote)
        } else {
            (remote, local)
        };
        let bytes = subflow.carried(sending);
        match paths.iter_mut().find(|p| p.from == from && p.to == to) {
            Some(path) => {
                path.subflows += 1;
                path.bytes += bytes;
            }
            None => paths.push(PathShare {
                from,
                to,
                subflows: 1,
                bytes,
            }),
        }
    }
    paths
}

/// The report's MPTCP line for a run, or none for a run without `--mptcp`.
pub fn mptcp_text(result: &StreamResult) -> Option<String> {
    mptcp_line(&result.sender, &result.receiver, result.link.as_ref())
}

/// The MPTCP line from a run's two ends and its link.
fn mptcp_line(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    link: Option<&LinkFacts>,
) -> Option<String> {
    let (stats, sending, whose) = match (&receiver.mptcp, &sender.mptcp) {
        (Some(r), _) if !r.subflows.is_empty() => (r, false, "received, by the receiver's count"),
        (_, Some(s)) => (s, true, "acknowledged, by the sender's count"),
        (Some(r), None) => (r, false, "received, by the receiver's count"),
        (None, None) => return None,
    };
    if stats.fell_back {
        return Some(
            "MPTCP: the connection fell back to plain TCP: the peer did not answer MP_CAPABLE (a host without MPTCP, net.mptcp.enabled = 0 there, or a middlebox that strips TCP options)\n"
                .into(),
        );
    }
    if let Some(why) = &stats.unread {
        return Some(format!("MPTCP: the subflows could not be read: {why}\n"));
    }
    let paths = path_shares(stats, sending);
    let total: u64 = paths.iter().map(|p| p.bytes).sum();
    let show = |ip: Option<IpAddr>| ip.map_or("?".to_string(), |ip| ip.to_string());
    let each: Vec<String> = paths
        .iter()
        .map(|p| {
            format!(
                "{} → {} {:.1}% ({:.1} MB{})",
                show(p.from),
                show(p.to),
                100.0 * p.bytes as f64 / total.max(1) as f64,
                p.bytes as f64 / 1e6,
                if p.subflows > 1 {
                    format!(" over {} subflows", p.subflows)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    let mut line = format!(
        "MPTCP (last run): {} subflow{} over {} path{}: {} [bytes {whose}]",
        stats.subflows.len(),
        if stats.subflows.len() == 1 { "" } else { "s" },
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        each.join(", "),
    );
    if paths.len() == 1 {
        line.push_str(&format!("; {}", one_path_why(link)));
    }
    line.push('\n');
    Some(line)
}

/// Why a connection used one path: the second netlab built was not
/// joined, or there was only one to use.
fn one_path_why(link: Option<&LinkFacts>) -> String {
    match link.and_then(|l| l.second_path.as_ref()) {
        Some(second) => format!(
            "the second path ({} and {}) carried nothing: the kernel's path manager opened no subflow over it ({})",
            second.addresses[0], second.addresses[1], second.path_manager
        ),
        None if link.is_some() => {
            "the link is one path (no second path was built)".to_string()
        }
        None => "one path between these addresses: a second needs a path-manager endpoint on the connecting host (`ip mptcp endpoint add ADDR dev DEV subflow`) and room for it on both (`ip mptcp limits set subflows 2`); on one host's loopback there is only the one".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::mptcp::Subflow;
    use crate::measure::tcpinfo::TcpInfo;

    fn subflow(local: &str, remote: &str, received: u64) -> Subflow {
        Subflow {
            local: Some(local.parse().unwrap()),
            remote: Some(remote.parse().unwrap()),
            info: TcpInfo {
                bytes_received: Some(received),
                bytes_acked: Some(received + 1),
                ..TcpInfo::default()
            },
        }
    }

    #[test]
    fn subflows_on_one_pair_of_addresses_add_up_as_one_path() {
        let stats = MptcpStats {
            subflows: vec![
                subflow("198.18.0.2:5001", "198.18.0.1:40000", 600),
                subflow("198.18.0.2:5001", "198.18.0.5:40001", 300),
                subflow("198.18.0.2:5002", "198.18.0.1:40002", 100),
            ],
            ..MptcpStats::default()
        };
        let paths = path_shares(&stats, false);
        assert_eq!(paths.len(), 2);
        assert_eq!(paths[0].from, Some("198.18.0.1".parse().unwrap()));
        assert_eq!((paths[0].subflows, paths[0].bytes), (2, 700));
        assert_eq!((paths[1].subflows, paths[1].bytes), (1, 300));
        // The sender's view: its own address first, acknowledged bytes.
        let sent = path_shares(&stats, true);
        assert_eq!(sent[0].from, Some("198.18.0.2".parse().unwrap()));
        assert_eq!(sent[0].bytes, 702);
    }

    #[test]
    fn the_line_names_each_paths_share_and_a_fallback_plainly() {
        let sender = EndpointReport::default();
        let mut receiver = EndpointReport::default();
        assert_eq!(mptcp_line(&sender, &receiver, None), None);
        receiver.mptcp = Some(MptcpStats {
            subflows: vec![
                subflow("198.18.0.2:5001", "198.18.0.1:40000", 750),
                subflow("198.18.0.2:5001", "198.18.0.5:40001", 250),
            ],
            ..MptcpStats::default()
        });
        let text = mptcp_line(&sender, &receiver, None).unwrap();
        assert!(text.contains("2 subflows over 2 paths"), "{text}");
        assert!(text.contains("198.18.0.1 → 198.18.0.2 75.0%"), "{text}");
        assert!(text.contains("198.18.0.5 → 198.18.0.2 25.0%"), "{text}");
        receiver.mptcp = Some(MptcpStats {
            fell_back: true,
            ..MptcpStats::default()
        });
        let text = mptcp_line(&sender, &receiver, None).unwrap();
        assert!(text.contains("fell back to plain TCP"), "{text}");
    }
}
