//! `netlab stream --to iperf3:HOST[:PORT]`: a TCP test against a stock
//! iperf3 server ([`crate::endpoint::iperf3`]), netlab's end measured
//! here, the server's figures from its results exchange, side by side.
//!
//! TCP and UDP, `-P`, `-R`, `--bidir`; the limits verdict on each TCP
//! stream from netlab's end (with `-R`, from the receiver's evidence
//! alone, and it says so); netlab's table and JSON, or iperf3's document
//! and event lines ([`crate::export::iperf3`]). What does not apply is
//! refused by name.

use crate::analysis::limits::{
    FlowEvidence, IntervalEvidence, PathEvidence, SenderTcp, SideEvidence,
};
use crate::endpoint::bulk::socket::{Shaping, autotune_max};
use crate::endpoint::iperf3::run;
use crate::endpoint::iperf3::types::{Iperf3Run, Iperf3Spec, LocalStream, Progress, Tick};
use crate::export::iperf3 as format;
use crate::options::Output;
use crate::report::table::markdown;
use crate::wire::iperf3::Results;
use anyhow::Context;
use serde_json::Value;
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
        let theirs = run
            .server
            .iter()
            .flat_map(|s| &s.streams)
            .find(|s| s.id == local.id);
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
                match run
                    .server
                    .iter()
                    .flat_map(|s| &s.streams)
                    .find(|s| s.id == local.id)
                {
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
        "CPU: netlab {:.1}% of one CPU over the test, the server {} ({}); the server's congestion control: {}\n",
        run.client.cpu_util_total,
        run.server.as_ref().map_or("not reported".into(), |s| format!("{:.1}%", s.cpu_util_total)),
        "its own report",
        run.server.as_ref().and_then(|s| s.congestion_used.as_deref()).unwrap_or("not said")
    ));
    text
}

/// netlab's side of the path to the server, read around the test: the
/// interface the test left by, its link speed, and the shapers on it
/// (its egress qdiscs when netlab sends; the ifb devices ingress shaping
/// is redirected to when it receives), what they dropped and held back.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LocalPath {
    pub interface: Option<String>,
    pub link_speed: Option<crate::measure::ifstat::LinkSpeed>,
    pub shapers: Vec<crate::measure::qdisc::Shaper>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shapers_unread: Option<String>,
}

/// The interface a packet to `server` leaves by (a connected UDP socket's
/// address: no packet is sent).
fn interface_towards(server: SocketAddr) -> Option<String> {
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let probe = std::net::UdpSocket::bind(any).ok()?;
    probe.connect(server).ok()?;
    crate::measure::ifstat::interface_with(probe.local_addr().ok()?.ip())
}

/// The shapers a test crosses on netlab's side, read before it (as a
/// netlab stream's ends read theirs: [`Shaping`]).
struct PathWatch {
    interface: Option<String>,
    shaping: Shaping,
}

impl PathWatch {
    fn start(spec: &Iperf3Spec) -> PathWatch {
        let interface = interface_towards(spec.server);
        let mut interfaces: Vec<String> = interface.iter().cloned().collect();
        if spec.reverse || spec.bidir {
            interfaces.extend(crate::measure::qdisc::ifb_devices());
        }
        PathWatch {
            interface,
            shaping: Shaping::start(interfaces),
        }
    }

    fn finish(self) -> LocalPath {
        let (shapers, shapers_unread) = self.shaping.finish();
        LocalPath {
            link_speed: self
                .interface
                .as_deref()
                .and_then(crate::measure::ifstat::link_speed),
            interface: self.interface,
            shapers,
            shapers_unread,
        }
    }
}

/// The limits verdict on one TCP stream, with which end's evidence it
/// rests on.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamVerdict {
    pub stream: i64,
    pub netlab_sends: bool,
    /// `sender and receiver`, or `receiver only` (netlab received: the
    /// iperf3 server's socket is not netlab's to read).
    pub evidence: &'static str,
    pub verdict: crate::analysis::limits::Verdict,
}

/// netlab's side of a stream as the verdict reads it: its thread's CPU,
/// calls, switches and wait for a core, its socket's buffer.
fn netlab_side(local: &LocalStream, sender: bool) -> SideEvidence {
    let thread = local.thread.as_ref();
    SideEvidence {
        wall_s: local.seconds,
        cpu_s: thread.map_or(0.0, |t| t.usage.cpu_s()),
        user_s: thread.map(|t| t.usage.user_s),
        syscalls: thread.map_or(0, |t| t.calls),
        voluntary_cs: thread.map_or(0, |t| t.usage.voluntary_cs),
        involuntary_cs: thread.map_or(0, |t| t.usage.involuntary_cs),
        socket_buffer: thread.and_then(|t| t.socket_buffer),
        buffer_set: false,
        buffer_max: autotune_max(if sender { "tcp_wmem" } else { "tcp_rmem" }),
        run_delay_s: thread.and_then(|t| t.run_delay_s),
        ..SideEvidence::default()
    }
}

/// The iperf3 server's side as its results say: its process's CPU over
/// the test (iperf 3.12 runs every stream on one thread), nothing else.
fn server_side(server: &Results, seconds: f64) -> SideEvidence {
    SideEvidence {
        wall_s: seconds,
        cpu_s: server.cpu_util_total / 100.0 * seconds,
        user_s: Some(server.cpu_util_user / 100.0 * seconds),
        ..SideEvidence::default()
    }
}

/// netlab's sending stream's TCP_INFO at each interval's end, as the
/// verdict's intervals: the chrono accounting's shares of each interval.
fn interval_evidence(run: &Iperf3Run, id: i64) -> Vec<IntervalEvidence> {
    let info_at = |t: &Tick| {
        t.streams
            .iter()
            .find(|s| s.id == id)
            .and_then(|s| s.tcp_info.clone())
    };
    let mut out = Vec::new();
    let mut before: Option<crate::measure::tcpinfo::TcpInfo> = None;
    for tick in &run.intervals {
        let Some(now) = info_at(tick) else { continue };
        let seconds = (tick.end_s - tick.start_s).max(1e-9);
        let last = before.as_ref();
        let chrono = now
            .chrono_us()
            .map(|n| (n, last.and_then(|b| b.chrono_us()).unwrap_or([0; 3])));
        if let Some((n, b)) = chrono {
            let share = |k: usize| (n[k].saturating_sub(b[k]) as f64 / 1e6 / seconds).min(1.0);
            out.push(IntervalEvidence {
                start_s: tick.start_s,
                end_s: tick.end_s,
                busy: share(0),
                rwnd_limited: share(1),
                sndbuf_limited: share(2),
                app_limited: now.delivery_rate_app_limited,
                delivery_rate_bps: now.delivery_rate_bps.map(|r| r as f64 * 8.0),
                rtt_us: (now.rtt_us > 0).then_some(now.rtt_us),
                ca_state: now.ca_state,
                retransmits: now
                    .total_retrans
                    .saturating_sub(last.map_or(0, |b| b.total_retrans)),
                cwnd: now.snd_cwnd,
            });
        }
        before = Some(now);
    }
    out
}

/// The path on netlab's side as evidence: the slowest shaper it read, or
/// its interface's speed where the driver reports a real one.
fn path_evidence(
    path: &LocalPath,
    mss: u32,
    delivered_bps: f64,
    netlab_sends: bool,
) -> PathEvidence {
    let mut evidence = PathEvidence {
        overhead: (f64::from(mss.max(1)) + 52.0) / f64::from(mss.max(1)),
        ..PathEvidence::default()
    };
    evidence.shapers = path
        .shapers
        .iter()
        .map(|s| crate::analysis::limits::ShaperEvidence {
            host: "netlab".into(),
            interface: s.interface.clone(),
            direction: if s.interface.starts_with("ifb") {
                "ingress, via ifb".into()
            } else {
                "egress".into()
            },
            kind: s.kind.clone(),
            rate_bps: s.rate_bps,
            drops: s.drops,
            overlimits: s.overlimits,
            backlog_bytes: Some(s.backlog_bytes),
        })
        .collect();
    // Only a shaper in the flow's direction bounds it.
    evidence
        .shapers
        .retain(|s| s.direction.starts_with("egress") == netlab_sends);
    if let Some(why) = &path.shapers_unread {
        evidence.unread.push(format!("netlab's shapers: {why}"));
    }
    evidence
        .unread
        .push("the iperf3 server's side of the path (its qdiscs and interfaces)".into());
    if let Some(slowest) = evidence.shapers.iter().min_by_key(|s| s.rate_bps) {
        evidence.rate_bps = Some(slowest.rate_bps);
        evidence.rate_source = slowest.describe();
    } else if let Some(speed) = path.link_speed.as_ref().filter(|s| !s.nominal())
        && delivered_bps < speed.mbit_s as f64 * 1e6
    {
        evidence.rate_bps = Some(speed.mbit_s * 1_000_000);
        evidence.rate_source = format!(
            "netlab's interface's reported speed ({} {} Mbit/s; ethtool's Speed)",
            speed.interface, speed.mbit_s
        );
    }
    evidence
}

/// The limits verdict on each TCP stream, from what netlab's end saw:
/// where netlab sends, its socket's TCP_INFO and chrono accounting, its
/// thread's CPU and the server's reported CPU, judged as any netlab flow;
/// where it receives, its own evidence alone
/// ([`crate::analysis::limits::judge_receiver_side`]). None for UDP, or
/// for a test that ended early.
pub fn verdicts(spec: &Iperf3Spec, run: &Iperf3Run, path: &LocalPath) -> Vec<StreamVerdict> {
    let Some(server) = run.server.as_ref() else {
        return Vec::new();
    };
    if spec.udp_bps.is_some() {
        return Vec::new();
    }
    run.streams
        .iter()
        .map(|local| {
            let peer = server.streams.iter().find(|p| p.id == local.id);
            let delivered = if local.sender {
                peer.map_or(local.bytes, |p| p.bytes)
            } else {
                local.bytes
            };
            let mss = local.tcp_info.as_ref().map_or(1448, |i| i.snd_mss.max(1));
            let delivered_bps = delivered as f64 * 8.0 / local.seconds.max(1e-9);
            let (sender, receiver) = if local.sender {
                (netlab_side(local, true), server_side(server, local.seconds))
            } else {
                (server_side(server, local.seconds), netlab_side(local, false))
            };
            let tcp = local.tcp_info.as_ref().filter(|_| local.sender).map(|t| {
                let cc = local.thread.as_ref().and_then(|t| t.congestion_control.clone());
                SenderTcp::of(t, cc, None)
            });
            let flow = FlowEvidence {
                bytes: delivered,
                record: spec.len as u64,
                sender,
                receiver,
                tcp,
                path: path_evidence(path, mss, delivered_bps, local.sender),
                paced_bps: None,
                intervals: if local.sender {
                    interval_evidence(run, local.id)
                } else {
                    Vec::new()
                },
                samples: Vec::new(),
                handshake_s: None,
                subflows: 0,
            };
            let mut verdict = if local.sender {
                crate::analysis::limits::judge(&flow)
            } else {
                crate::analysis::limits::judge_receiver_side(&flow)
            };
            // The server's CPU named from its own report, with a fix that
            // applies to it (netlab's receive options do not).
            for limit in &mut verdict.limits {
                if local.sender && limit.factor == crate::analysis::limits::Factor::ReceiverCpu {
                    limit.evidence.retain(|k, _| k == "receiver_cpu_pct");
                    limit.fix = format!(
                        "the iperf3 server's CPU was saturated ({:.0}% of one CPU by its own report; iperf3 before 3.16 runs every stream on one thread): run one server per stream (iperf3 -s -p PORT, one --to each), or iperf3 3.16 or later, or a faster receiving host",
                        server.cpu_util_total
                    );
                }
            }
            if local.sender {
                verdict.missing.push(
                    "the iperf3 server's run delay, socket buffer and counters (its results carry only its CPU)".into(),
                );
            }
            StreamVerdict {
                stream: local.id,
                netlab_sends: local.sender,
                evidence: if local.sender {
                    "sender and receiver"
                } else {
                    "receiver only"
                },
                verdict,
            }
        })
        .collect()
}

/// How the test prints.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printing {
    /// iperf3's document (`--format iperf3`) rather than netlab's.
    pub iperf3: bool,
    /// Event lines as the test runs (`--json-stream`).
    pub lines: bool,
}

/// A test that ended before its results were exchanged: its figures are
/// printed (marked incomplete) before this error ends the command.
#[derive(Debug, thiserror::Error)]
#[error(
    "the test against {server} did not finish: {why}; netlab's figures up to then are printed above, marked incomplete"
)]
pub struct Incomplete {
    pub server: SocketAddr,
    pub why: String,
}

/// Runs the test and prints it: netlab's table, netlab's JSON, or
/// iperf3's document or event lines, with the limits verdict on each TCP
/// stream. A test that ended early prints what was counted, marked
/// incomplete, and then fails.
pub fn run_against(
    spec: &Iperf3Spec,
    options: &crate::options::run::RunOptions,
    printing: Printing,
    out: &mut Output,
) -> anyhow::Result<()> {
    let watch = PathWatch::start(spec);
    let test = format::Test::of(spec);
    let (mut start_doc, mut intervals, mut last_tick) = (Value::Null, Vec::new(), None::<Tick>);
    let mut connected = Vec::new();
    let mut failed_print = None;
    let mut line = |out: &mut Output, name: &str, data: &Value| {
        if let Err(e) = out.text(&format!("{}\n", format::event(name, data))) {
            failed_print.get_or_insert(e);
        }
    };
    let stop = crate::controller::processes::interrupt_flag();
    let result = run(
        spec,
        &mut |progress| match progress {
            Progress::Started {
                connected: c,
                cookie,
            } => {
                connected = c.to_vec();
                start_doc = format::start(&test, c, cookie);
                if printing.lines {
                    line(out, "start", &start_doc);
                }
            }
            Progress::Interval(tick) => {
                let doc = format::interval(&test, &connected, last_tick.as_ref(), tick);
                if printing.lines {
                    if printing.iperf3 {
                        line(out, "interval", &doc);
                    } else {
                        line(
                            out,
                            "interval",
                            &serde_json::json!({"experiment": "stream-iperf3", "interval": doc}),
                        );
                    }
                }
                intervals.push(doc);
                last_tick = Some(tick.clone());
            }
        },
        &stop,
    )?;
    let path = watch.finish();
    let judged = verdicts(spec, &result, &path);
    let extra = serde_json::json!({
        "experiment": "stream-iperf3",
        "server": spec.server.to_string(),
        "limits": judged,
        "path": path,
        "host": crate::measure::host::HostFacts::gather(),
        "incomplete": result.incomplete,
    });
    let end = format::end(&test, &result);
    if printing.lines {
        if let Some(why) = &result.incomplete {
            line(out, "error", &Value::String(why.clone()));
        }
        line(out, "netlab", &extra);
        line(out, "end", &end);
    } else if printing.iperf3 {
        let doc = format::document(start_doc, intervals, end, &result, extra);
        out.text(&crate::export::Export::render(&format::Document(doc))?)?;
    } else {
        options.finish_unrecorded(
            out,
            serde_json::json!({
                "experiment": "stream-iperf3",
                "server": spec.server.to_string(),
                "run": result,
                "limits": judged,
                "path": path,
            }),
            || {
                let mut text = text(spec, &result);
                for v in &judged {
                    text.push_str(&format!(
                        "stream {} ({}, {} evidence): {}\n",
                        v.stream,
                        if v.netlab_sends {
                            "netlab sends"
                        } else {
                            "netlab receives"
                        },
                        v.evidence,
                        v.verdict.headline()
                    ));
                }
                if let Some(why) = &result.incomplete {
                    text.push_str(&format!(
                        "INCOMPLETE: {why}; the figures above are netlab's up to then\n"
                    ));
                }
                text
            },
        )?;
    }
    if let Some(e) = failed_print {
        return Err(e.into());
    }
    match &result.incomplete {
        Some(why) => Err(crate::options::run::PrintedIncomplete(
            Incomplete {
                server: spec.server,
                why: why.clone(),
            }
            .into(),
        )
        .into()),
        None => Ok(()),
    }
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
