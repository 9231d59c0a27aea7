//! Where the working latency built up: the self probes' round trip under
//! load split into the queues it waited in, each read where it is, and a
//! verdict in the limits style (the queue, its share, the evidence, the
//! fix), or "undecided" when no one queue explains the added delay.
//!
//! Each queue's time is its bytes over the rate they drain at (the
//! goodput of the load's direction), averaged over the result's window:
//! - the sender's socket: bytes written and not yet sent
//!   (`tcpi_notsent_bytes`);
//! - the sender's qdisc: the root qdisc's backlog (netlink);
//! - the bottleneck: on netlab's emulated link, the queue's own sojourn
//!   times (read from the link model, packet by packet); elsewhere, the
//!   sending connections' smoothed RTT above the least they saw
//!   (`tcpi_rtt - tcpi_min_rtt`), less the sender's qdisc (which the RTT
//!   includes): an inference, and said to be one;
//! - the receiver: bytes received and not yet read (SIOCINQ).
//!
//! The idle round trip is the path itself; what is left over is not
//! explained, and says so.

use super::record::{DelaySplit, Part, RpmResult};
use crate::endpoint::rpm::types::{Direction, SocketQueue};

/// The mean of `f` over `samples` within `[from, to)` seconds.
fn mean_in(
    samples: &[SocketQueue],
    from: f64,
    to: f64,
    f: impl Fn(&SocketQueue) -> f64,
) -> Option<f64> {
    let values: Vec<f64> = samples
        .iter()
        .filter(|s| s.t_s >= from && s.t_s < to)
        .map(f)
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The split of `result`'s self probes, over its summary's window.
pub fn split(result: &RpmResult, direction: Direction) -> Option<DelaySplit> {
    let summary = &result.summary;
    let working = summary.tm_http_l_ms?;
    let idle = summary.idle_ms?;
    let (first, last) = summary.window?;
    let id = result.draft.id_s;
    let (from, to) = (first as f64 * id, (last + 1) as f64 * id);
    // Which way the bulk data goes: a download's sender is the serving end.
    let download = direction != Direction::Up;
    let rate_bytes_s = if download {
        summary.goodput_down_bps
    } else {
        summary.goodput_up_bps
    } / 8.0;
    if rate_bytes_s <= 0.0 {
        return None;
    }
    let as_ms = |bytes: f64| bytes / rate_bytes_s * 1000.0;
    let origin = result.client.load_started_unix_ns as f64 / 1e9;
    // The serving end's samples on the load's clock.
    let server: Vec<SocketQueue> = result
        .server
        .queues
        .iter()
        .map(|q| SocketQueue {
            t_s: q.t_s - origin,
            ..*q
        })
        .collect();
    let (sender, receiver) = if download {
        (&server, &result.client.queues)
    } else {
        (&result.client.queues, &server)
    };
    let mut parts = vec![Part {
        name: "the path (idle round trip)".into(),
        ms: idle,
        share: 0.0,
        evidence: format!("foreign probes on the quiet path: {idle:.1} ms"),
    }];
    let notsent = mean_in(sender, from, to, |q| q.notsent_bytes as f64);
    if let Some(bytes) = notsent {
        parts.push(Part {
            name: "the sender's socket".into(),
            ms: as_ms(bytes),
            share: 0.0,
            evidence: format!(
                "tcpi_notsent_bytes {:.0} KB on average over the load connections, draining at {:.1} Mbit/s",
                bytes / 1024.0,
                rate_bytes_s * 8.0 / 1e6
            ),
        });
    }
    let qdisc = mean_in(sender, from, to, |q| q.qdisc_backlog_bytes as f64).unwrap_or(0.0);
    parts.push(Part {
        name: "the sender's qdisc".into(),
        ms: as_ms(qdisc),
        share: 0.0,
        evidence: format!(
            "root qdisc backlog {:.0} KB on average (netlink)",
            qdisc / 1024.0
        ),
    });
    parts.extend(bottleneck(
        result,
        download,
        sender,
        (from, to),
        as_ms(qdisc),
    ));
    if let Some(bytes) = mean_in(receiver, from, to, |q| q.unread_bytes as f64) {
        parts.push(Part {
            name: "the receiver's unread bytes".into(),
            ms: as_ms(bytes),
            share: 0.0,
            evidence: format!("SIOCINQ {:.0} KB on average", bytes / 1024.0),
        });
    }
    let explained: f64 = parts.iter().map(|p| p.ms).sum();
    parts.push(Part {
        name: "not explained".into(),
        ms: working - explained,
        share: 0.0,
        evidence: "the self probes' round trip less every part above (negative: the parts overlap or were read at other moments)".into(),
    });
    Some(judged(parts, working, idle))
}

/// The bottleneck's queue over the window `(from, to)`: the emulator's
/// own reading where the path is emulated, else inferred from the sending
/// connections' RTT above their least, less the sender's qdisc
/// (`qdisc_ms`).
fn bottleneck(
    result: &RpmResult,
    download: bool,
    sender: &[SocketQueue],
    (from, to): (f64, f64),
    qdisc_ms: f64,
) -> Option<Part> {
    let loaded_dir = if download { 1 } else { 0 };
    let emulated = result
        .emulator
        .as_ref()
        .and_then(|e| e.bottleneck.as_ref())
        .map(|b| b[loaded_dir].clone());
    match emulated {
        Some(queue) => {
            let origin_ms =
                (result.client.load_started_unix_ns as f64 - queue.origin_unix_ns as f64) / 1e6;
            let (mut sent, mut weighted, mut max) = (0u64, 0.0, 0.0f64);
            for s in &queue.timeline {
                let t = (s.t_ms as f64 - origin_ms) / 1000.0;
                if t >= from && t < to {
                    sent += s.sent;
                    weighted += s.sojourn_ms_mean * s.sent as f64;
                    max = max.max(s.sojourn_ms_max);
                }
            }
            (sent > 0).then(|| {
                let mean = weighted / sent as f64;
                Part {
                    name: format!("the bottleneck's {} queue", queue.discipline),
                    ms: mean,
                    share: 0.0,
                    evidence: format!(
                        "the emulator's own reading: {sent} packets waited {mean:.1} ms on average, {max:.1} ms at most"
                    ),
                }
            })
        }
        None => {
            let above = mean_in(sender, from, to, |q| (q.srtt_ms - q.min_rtt_ms).max(0.0));
            above.map(|ms| {
                let ms = (ms - qdisc_ms).max(0.0);
                Part {
                    name: "the bottleneck (inferred)".into(),
                    ms,
                    share: 0.0,
                    evidence: format!(
                        "the sending connections' RTT {ms:.1} ms above their least (tcpi_rtt - tcpi_min_rtt, less the sender's qdisc): an inference, not a reading"
                    ),
                }
            })
        }
    }
}

/// The parts' shares of the working round trip and the verdict: the
/// largest queue read, when it holds half the delay load added or more;
/// else undecided.
fn judged(mut parts: Vec<Part>, working: f64, idle: f64) -> DelaySplit {
    for part in &mut parts {
        part.share = part.ms / working;
    }
    let added = (working - idle).max(0.0);
    let largest = parts
        .iter()
        .skip(1)
        .filter(|p| p.name != "not explained")
        .max_by(|a, b| a.ms.total_cmp(&b.ms))
        .cloned();
    let mut split = DelaySplit {
        working_ms: working,
        parts,
        ..Default::default()
    };
    match largest {
        Some(queue) if added > 1.0 && queue.ms >= 0.5 * added => {
            split.verdict = format!(
                "{} held {:.1} ms of the self probes' {:.1} ms working round trip ({:.0}%; {:.1} ms were the idle path): {}",
                capitalised(&queue.name),
                queue.ms,
                working,
                queue.share * 100.0,
                idle,
                queue.evidence
            );
            split.fix = Some(fix_for(&queue.name));
            split.queue = Some(queue.name);
        }
        _ => {
            split.verdict = format!(
                "undecided: no one queue explains the {added:.1} ms added under load (the largest part read is under half of it)"
            );
        }
    }
    split
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The fix for the queue named `name`.
fn fix_for(name: &str) -> String {
    if name.contains("socket") {
        "TCP_NOTSENT_LOWAT on the sender (--notsent-lowat 16K): the socket keeps only what the path will take soon, and a request waits behind little".into()
    } else if name.contains("qdisc") {
        "a short or fair qdisc on the sender (fq_codel, or a smaller txqueuelen)".into()
    } else if name.contains("droptail") || name.contains("inferred") {
        "an AQM at the bottleneck (--queue-discipline fq_codel on netlab's link; fq_codel or cake on a real router), or a queue no deeper than the path's BDP".into()
    } else if name.contains("receiver") {
        "the receiving application reads late: read sooner, or with more readers".into()
    } else {
        "FQ-CoDel's flow queues: a sparse request overtakes the bulk flows (--queue-discipline fq_codel)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::Summary;
    use super::*;
    use crate::analysis::responsiveness::Params;
    use crate::endpoint::rpm::types::{ClientReport, ServerReport};
    use crate::record::testbed::{BottleneckCounts, EmulatorReport, QueueSample};

    /// A download at 48 Mbit/s over intervals 4..=7, with the server's
    /// socket holding `notsent` bytes and the emulator's queue `sojourn` ms.
    fn result(notsent: u64, sojourn: f64, working: f64) -> RpmResult {
        let origin_ns = 1_000_000_000_000u64;
        let server = ServerReport {
            queues: (0..100)
                .map(|k| SocketQueue {
                    t_s: origin_ns as f64 / 1e9 + k as f64 * 0.1,
                    notsent_bytes: notsent,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let queue = BottleneckCounts {
            discipline: "droptail".into(),
            origin_unix_ns: origin_ns,
            timeline: (0..100)
                .map(|k| QueueSample {
                    t_ms: k * 100,
                    sojourn_ms_mean: sojourn,
                    sojourn_ms_max: sojourn,
                    sent: 400,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        RpmResult {
            draft: Params::default(),
            client: ClientReport {
                load_started_unix_ns: origin_ns,
                ..Default::default()
            },
            server,
            link: None,
            emulator: Some(EmulatorReport {
                bottleneck: Some([BottleneckCounts::default(), queue]),
                ..Default::default()
            }),
            summary: Summary {
                tm_http_l_ms: Some(working),
                idle_ms: Some(10.0),
                window: Some((4, 7)),
                goodput_down_bps: 48e6,
                ..Default::default()
            },
            split: None,
            irtt: None,
        }
    }

    #[test]
    fn a_deep_bottleneck_queue_is_named_with_its_reading_and_fix() {
        // 200 ms in the queue, 16 KB (2.7 ms at 48 Mbit/s) in the socket.
        let s = split(&result(16 << 10, 200.0, 215.0), Direction::Down).unwrap();
        assert_eq!(s.queue.as_deref(), Some("the bottleneck's droptail queue"));
        assert!(s.verdict.contains("200.0 ms"), "{}", s.verdict);
        assert!(s.fix.unwrap().contains("fq_codel"));
        let socket = s
            .parts
            .iter()
            .find(|p| p.name == "the sender's socket")
            .unwrap();
        assert!((socket.ms - 16384.0 / 6e6 * 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_full_socket_is_named_when_the_link_queue_is_short() {
        // 1.2 MB unsent at 6 MB/s: 200 ms; the link's queue 3 ms.
        let s = split(&result(1_200_000, 3.0, 215.0), Direction::Down).unwrap();
        assert_eq!(s.queue.as_deref(), Some("the sender's socket"));
        assert!(s.fix.unwrap().contains("TCP_NOTSENT_LOWAT"));
    }

    #[test]
    fn no_queue_that_explains_half_the_added_delay_is_undecided() {
        // 100 ms added, 20 in the queue and 5 in the socket.
        let s = split(&result(30_000, 20.0, 110.0), Direction::Down).unwrap();
        assert_eq!(s.queue, None);
        assert!(s.verdict.starts_with("undecided"), "{}", s.verdict);
        let unexplained = s.parts.iter().find(|p| p.name == "not explained").unwrap();
        assert!(unexplained.ms > 70.0);
    }
}
