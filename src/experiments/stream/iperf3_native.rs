//! netlab's own stream run (between its endpoints: loopback, namespaces or
//! agents) as iperf3's document (`--format iperf3`), by the same writer as
//! a test against an iperf3 server ([`crate::export::iperf3`]): the `--from`
//! end is iperf3's client, the `--to` end its server, each connection a
//! stream (ids 1, 3, 4, ... as iperf3 numbers them), each end's own
//! reports its figures, the sender's `--interval` samples the intervals.
//!
//! What iperf3 has and a netlab run does not is said, not made up: no
//! cookie (netlab's control channel is its own), the connections' sockets
//! named by their stream ids, the placement for the host connected to.

use crate::endpoint::bulk::types::EndpointReport;
use crate::endpoint::iperf3::types::{Connected, Iperf3Run, LocalStream, Tick};
use crate::experiments::stream::record::{Direction, Record, StreamResult};
use crate::export::iperf3::{self as format, Test};
use crate::measure::tcpinfo::TcpInfo;
use crate::wire::iperf3::{Results, StreamResult as PeerStream};

/// iperf3's stream ids: 1, then 3, 4, ... (iperf3 skips 2).
fn stream_id(i: usize) -> i64 {
    if i == 0 { 1 } else { i as i64 + 2 }
}

/// Each connection: whether the `--to` end sent, its sender and receiver.
fn connections(result: &StreamResult) -> Vec<(bool, &EndpointReport, &EndpointReport)> {
    if result.flows.is_empty() {
        vec![(false, &result.sender, &result.receiver)]
    } else {
        result
            .flows
            .iter()
            .map(|f| (f.reverse, &f.sender, &f.receiver))
            .collect()
    }
}

/// One end's account as iperf3's results carry it: its CPU over the run
/// (percent of one CPU, its processes summed) and its streams.
fn results(ends: &[&EndpointReport], streams: Vec<PeerStream>, sends: bool) -> Results {
    let wall = ends.iter().map(|e| e.wall_s).fold(0.0, f64::max).max(1e-9);
    let sum = |f: fn(&EndpointReport) -> f64| ends.iter().map(|e| f(e)).sum::<f64>();
    Results {
        cpu_util_total: 100.0 * sum(|e| e.usage.cpu_s()) / wall,
        cpu_util_user: 100.0 * sum(|e| e.usage.user_s) / wall,
        cpu_util_system: 100.0 * sum(|e| e.usage.sys_s) / wall,
        sender_has_retransmits: if sends { 1 } else { -1 },
        congestion_used: ends.iter().find_map(|e| e.congestion_control.clone()),
        streams,
        server_output_text: None,
    }
}

/// A receiver's UDP account: datagrams (the highest it knows of: received
/// and lost), lost, jitter in seconds.
fn udp_received(receiver: &EndpointReport) -> (i64, i64, f64) {
    receiver.udp.as_ref().map_or((0, 0, 0.0), |u| {
        let lost = u.lost.unwrap_or(0);
        ((u.received + lost) as i64, lost as i64, u.jitter_ms / 1e3)
    })
}

/// The test as iperf3 would describe it.
fn test_of(record: &Record) -> Test {
    let p = &record.data.params;
    Test {
        udp_bps: p.udp.map(|u| u.rate_bps),
        parallel: p.flows.parallel,
        reverse: p.flows.direction == Direction::Reverse,
        bidir: p.flows.direction == Direction::Both,
        len: p.udp.map_or(p.record as usize, |u| u.length),
        duration_s: p.duration_s.map_or(0, |s| s.ceil() as u64),
        bytes: p.bytes.unwrap_or(0),
        host: record.placement.clone(),
        port: 0,
    }
}

/// The sender's TCP_INFO at an interval's end, as far as its sample kept
/// it (retransmits summed up to then).
fn info_at(
    sample: &crate::endpoint::bulk::types::IntervalSample,
    retransmits: u32,
    mss: u32,
) -> TcpInfo {
    TcpInfo {
        rtt_us: sample.rtt_us,
        rttvar_us: sample.rttvar_us.unwrap_or(0),
        snd_cwnd: sample.cwnd,
        snd_mss: sample.mss.unwrap_or(mss),
        pmtu: sample.pmtu.unwrap_or(0),
        total_retrans: retransmits,
        snd_wnd: sample.snd_wnd,
        ..TcpInfo::default()
    }
}

/// The run as iperf3's client and server would have reported it, with
/// its intervals as cumulative counts.
fn run_of(record: &Record, result: &StreamResult) -> Iperf3Run {
    let udp = record.data.params.udp.is_some();
    let flows = connections(result);
    let mut streams = Vec::new();
    let mut peers = Vec::new();
    let mut connected = Vec::new();
    for (i, &(reverse, sender, receiver)) in flows.iter().enumerate() {
        let id = stream_id(i);
        // The client (`--from`) end, and the server's.
        let (local, peer) = if reverse {
            (receiver, sender)
        } else {
            (sender, receiver)
        };
        let (packets, lost, jitter_s) = if !udp {
            (0, 0, 0.0)
        } else if reverse {
            udp_received(receiver)
        } else {
            let sent = sender.udp.as_ref().and_then(|u| u.sent).unwrap_or(0);
            (sent as i64, 0, 0.0)
        };
        streams.push(LocalStream {
            id,
            sender: !reverse,
            bytes: local.bytes,
            seconds: local.wall_s,
            packets: packets as u64,
            lost,
            jitter_s,
            tcp_info: if reverse {
                None
            } else {
                sender.tcp_info.clone()
            },
            thread: None,
        });
        let (peer_packets, peer_lost, peer_jitter) = if udp && !reverse {
            udp_received(receiver)
        } else {
            (0, 0, 0.0)
        };
        peers.push(PeerStream {
            id,
            bytes: peer.bytes,
            retransmits: match (reverse, &sender.tcp_info) {
                (true, Some(info)) => i64::from(info.total_retrans),
                _ => -1,
            },
            jitter: peer_jitter,
            errors: peer_lost,
            packets: peer_packets,
            start_time: 0.0,
            end_time: peer.wall_s,
        });
        connected.push(Connected {
            id,
            socket: id as i32,
            local: None,
            sender: !reverse,
            mss: local.mss,
            sndbuf: None,
            rcvbuf: None,
        });
    }
    // Intervals: each sender's samples, cumulated, the k-th of every
    // connection in the k-th tick.
    let ticks_n = flows
        .iter()
        .map(|(_, s, _)| s.intervals.len())
        .min()
        .unwrap_or(0);
    let mut ticks = Vec::new();
    for k in 0..ticks_n {
        let (start_s, end_s) = (
            flows[0].1.intervals[k].start_s,
            flows[0].1.intervals[k].end_s,
        );
        let tick_streams = flows
            .iter()
            .enumerate()
            .map(|(i, &(reverse, sender, _))| {
                let upto = &sender.intervals[..=k];
                let retransmits: u32 = upto.iter().map(|s| s.retransmits).sum();
                LocalStream {
                    id: stream_id(i),
                    sender: !reverse,
                    bytes: upto.iter().map(|s| s.bytes).sum(),
                    seconds: end_s,
                    packets: 0,
                    lost: 0,
                    jitter_s: 0.0,
                    tcp_info: (!reverse)
                        .then(|| info_at(&upto[k], retransmits, sender.mss.unwrap_or(1448))),
                    thread: None,
                }
            })
            .collect();
        ticks.push(Tick {
            start_s,
            end_s,
            streams: tick_streams,
        });
    }
    let (from_ends, to_ends): (Vec<&EndpointReport>, Vec<&EndpointReport>) = flows
        .iter()
        .map(|&(reverse, s, r)| if reverse { (r, s) } else { (s, r) })
        .unzip();
    let client_sends = flows.iter().any(|(reverse, _, _)| !reverse);
    let client = results(&from_ends, Vec::new(), client_sends);
    let server = results(&to_ends, peers, !client_sends);
    Iperf3Run {
        params: Default::default(),
        cookie: String::new(),
        connected,
        seconds: streams.iter().map(|s| s.seconds).fold(0.0, f64::max),
        streams,
        intervals: ticks,
        client,
        server: Some(server),
        usage: Default::default(),
        incomplete: None,
    }
}

/// iperf3's document for a stream record, netlab's own figures (`netlab`)
/// beside; an error naming why when the record holds no run.
pub fn document(record: &Record, netlab: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    let Some(result) = record.data.result.as_deref() else {
        anyhow::bail!(
            "the run failed ({}): no figures for iperf3's document",
            record.error.as_deref().unwrap_or("no result")
        );
    };
    let test = test_of(record);
    let run = run_of(record, result);
    let intervals = run
        .intervals
        .iter()
        .enumerate()
        .map(|(i, tick)| {
            format::interval(
                &test,
                &run.connected,
                i.checked_sub(1).map(|j| &run.intervals[j]),
                tick,
            )
        })
        .collect();
    Ok(format::document(
        format::start(&test, &run.connected, &run.cookie),
        intervals,
        format::end(&test, &run),
        &run,
        netlab,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_run_reads_as_iperf3_s_document() {
        let record = crate::experiments::stream::record::fixture_stream_run();
        let result = record.data.result.as_deref().unwrap();
        let doc = document(&record, serde_json::json!({"experiment": "stream"})).unwrap();
        let end = &doc["end"];
        // The sender's bytes sent, the receiver's received, each end's own.
        assert_eq!(end["sum_sent"]["bytes"], result.sender.bytes);
        assert_eq!(end["sum_received"]["bytes"], result.receiver.bytes);
        assert!(
            end["cpu_utilization_percent"]["host_total"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        assert!(end["cpu_utilization_percent"]["remote_total"].is_number());
        assert!(end["sum_sent"]["retransmits"].is_number(), "{end}");
        assert_eq!(doc["start"]["connecting_to"]["host"], record.placement);
    }
}
