//! `netlab stream --to iperf3:HOST[:PORT]`: a TCP test against a stock
//! iperf3 server ([`crate::endpoint::iperf3`]), netlab's end measured
//! here, the server's figures from its results exchange, side by side.
//!
//! Not yet: UDP, netlab's TCP_INFO and limits verdict on these streams,
//! and `--format iperf3`; what does not apply is refused by name.

use crate::endpoint::iperf3::{Iperf3Run, Iperf3Spec, run};
use crate::options::Output;
use crate::report::table::markdown;
use anyhow::Context;
use std::net::{SocketAddr, ToSocketAddrs};

/// `--to`'s text after `iperf3:` as the server's address.
pub fn server_address(text: &str) -> anyhow::Result<SocketAddr> {
    let with_port = if text.parse::<SocketAddr>().is_ok()
        || (text
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && !h.contains(':') && p.parse::<u16>().is_ok()))
    {
        text.to_string()
    } else if text.contains(':') && !text.starts_with('[') {
        // A bare IPv6 address.
        format!("[{text}]:{}", crate::wire::iperf3::DEFAULT_PORT)
    } else {
        format!("{text}:{}", crate::wire::iperf3::DEFAULT_PORT)
    };
    with_port
        .to_socket_addrs()
        .with_context(|| format!("--to iperf3:{text}: not a host, host:port or address"))?
        .next()
        .with_context(|| format!("--to iperf3:{text}: the name has no address"))
}

fn gbit(bytes: u64, seconds: f64) -> String {
    format!("{:.3}", bytes as f64 * 8.0 / seconds.max(1e-9) / 1e9)
}

/// The two ends' figures, stream by stream, and their sums.
pub fn text(spec: &Iperf3Spec, run: &Iperf3Run) -> String {
    let mut rows = Vec::new();
    for local in &run.streams {
        let theirs = run.server.streams.iter().find(|s| s.id == local.id);
        rows.push(vec![
            local.id.to_string(),
            if local.sender {
                "netlab -> iperf3".into()
            } else {
                "iperf3 -> netlab".into()
            },
            local.bytes.to_string(),
            gbit(local.bytes, local.seconds),
            theirs.map_or("-".into(), |s| s.bytes.to_string()),
            theirs.map_or("-".into(), |s| gbit(s.bytes, s.end_time)),
            // The sender's retransmits: netlab's TCP_INFO for its streams,
            // the server's report for the server's.
            match (local.sender, &local.tcp_info, theirs) {
                (true, Some(info), _) => info.total_retrans.to_string(),
                (false, _, Some(s)) if s.retransmits >= 0 => s.retransmits.to_string(),
                _ => "-".into(),
            },
            match (local.sender, &local.tcp_info) {
                (true, Some(i)) => format!("{:.2}", f64::from(i.rtt_us) / 1e3),
                _ => "-".into(),
            },
        ]);
    }
    let mut text = format!(
        "netlab stream --to iperf3:{}: {}, {} stream(s){}, {:.2} s from TEST_RUNNING to TEST_END\n",
        spec.server,
        match spec.udp_bps {
            Some(bps) => format!(
                "UDP at {:.3} Mbit/s a stream, {}-byte datagrams",
                bps as f64 / 1e6,
                spec.len
            ),
            None => "TCP".to_string(),
        },
        spec.parallel,
        match (spec.bidir, spec.reverse) {
            (true, _) => " each way (--bidir)",
            (false, true) => ", the server sending (-R)",
            _ => "",
        },
        run.seconds
    );
    text.push_str(&markdown(
        &[
            "stream",
            "direction",
            "netlab bytes",
            "netlab Gbit/s",
            "server bytes",
            "server Gbit/s",
            "sender retransmits",
            "netlab's RTT ms",
        ],
        &rows,
    ));
    if spec.udp_bps.is_some() {
        for local in &run.streams {
            // The receiving end's account: the server's for netlab's datagrams.
            let (who, packets, lost, jitter) = if local.sender {
                match run.server.streams.iter().find(|s| s.id == local.id) {
                    Some(s) => ("the server", s.packets, s.errors, s.jitter),
                    None => continue,
                }
            } else {
                ("netlab", local.packets as i64, local.lost, local.jitter_s)
            };
            text.push_str(&format!(
                "stream {}: {who} received up to datagram {packets}, {lost} lost ({:.2}%), jitter {:.3} ms\n",
                local.id,
                100.0 * lost as f64 / (packets.max(1) as f64),
                jitter * 1e3
            ));
        }
    }
    text.push_str(&format!(
        "CPU: netlab {:.1}% of one CPU over the test, the server {:.1}% ({}); the server's congestion control: {}\n",
        run.client.cpu_util_total,
        run.server.cpu_util_total,
        "its own report",
        run.server.congestion_used.as_deref().unwrap_or("not said")
    ));
    text
}

/// Runs the test and prints it.
pub fn run_against(
    spec: &Iperf3Spec,
    options: &crate::options::run::RunOptions,
    out: &mut Output,
) -> anyhow::Result<()> {
    let result = run(spec)?;
    options.finish_unrecorded(
        out,
        serde_json::json!({
            "experiment": "stream-iperf3",
            "server": spec.server.to_string(),
            "run": result,
        }),
        || text(spec, &result),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_gets_iperf3_s_port_unless_it_names_one() {
        assert_eq!(
            server_address("127.0.0.1").unwrap(),
            "127.0.0.1:5201".parse().unwrap()
        );
        assert_eq!(
            server_address("127.0.0.1:7000").unwrap(),
            "127.0.0.1:7000".parse().unwrap()
        );
        assert_eq!(
            server_address("::1").unwrap(),
            "[::1]:5201".parse().unwrap()
        );
        assert!(server_address("no such host.invalid").is_err());
    }
}
