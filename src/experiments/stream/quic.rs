//! `--quic`'s verdict and account (#65): what bounded a QUIC connection,
//! read from each end's CPU split into encryption (its packet keys' time),
//! the kernel (its UDP system calls and the stack under them: the end's
//! system time) and the rest of quinn (framing, acknowledgements, loss
//! recovery, the copies in and out of its buffers: user time less the
//! encryption); then loss, then neither.

use crate::analysis::limits::{Factor, Limit, SATURATED, Verdict};
use crate::endpoint::bulk::types::{EndpointReport, QuicStats};
use std::collections::BTreeMap;

/// One end's CPU over its data path, split three ways, as shares of its
/// wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub busy: f64,
    pub encryption: f64,
    pub kernel: f64,
    pub quinn: f64,
}

impl Split {
    pub fn of(end: &EndpointReport, quic: &QuicStats) -> Split {
        let wall = end.wall_s.max(1e-9);
        let encryption = quic.crypto_s().min(end.usage.user_s);
        Split {
            busy: end.usage.cpu_s() / wall,
            encryption: encryption / wall,
            kernel: end.usage.sys_s / wall,
            quinn: (end.usage.user_s - encryption).max(0.0) / wall,
        }
    }

    /// `41% encryption, 30% kernel (UDP system calls), 25% the rest of
    /// quinn`, of the end's CPU.
    pub fn words(&self) -> String {
        let of = |x: f64| 100.0 * x / self.busy.max(1e-9);
        format!(
            "{:.0}% encryption, {:.0}% the kernel (UDP system calls and the stack), {:.0}% the rest of quinn (framing, acknowledgements, loss recovery, copies)",
            of(self.encryption),
            of(self.kernel),
            of(self.quinn)
        )
    }
}

/// Datagrams a send or receive call carried on average.
fn per_call(datagrams: u64, calls: u64) -> f64 {
    datagrams as f64 / calls.max(1) as f64
}

/// What bounded a QUIC connection; None for other streams.
pub fn verdict(sender: &EndpointReport, receiver: &EndpointReport) -> Option<Verdict> {
    let (sq, rq) = (sender.quic.as_ref()?, receiver.quic.as_ref()?);
    let (s, r) = (Split::of(sender, sq), Split::of(receiver, rq));
    let mut limits = Vec::new();
    if s.busy >= SATURATED || r.busy >= SATURATED {
        let (who, end, quic, split, factor) = if s.busy >= r.busy {
            ("sender", sender, sq, s, Factor::SenderCpu)
        } else {
            ("receiver", receiver, rq, r, Factor::ReceiverCpu)
        };
        limits.push(saturated(who, end, quic, split, factor));
    }
    let sent = sq.datagrams_sent.max(1);
    let loss = sq.lost_packets as f64 / sent as f64;
    if loss >= 0.01 {
        limits.push(Limit {
            factor: Factor::Loss,
            share: 1.0,
            evidence: BTreeMap::from([
                ("lost_packets".to_string(), sq.lost_packets as f64),
                ("loss_pct".to_string(), 100.0 * loss),
                ("congestion_events".to_string(), sq.congestion_events as f64),
            ]),
            fix: format!(
                "quinn judged {:.1}% of its packets lost ({} congestion events): its congestion control held the rate down; find the loss on the path",
                100.0 * loss,
                sq.congestion_events
            ),
        });
    }
    if limits.is_empty() {
        limits.push(Limit {
            factor: Factor::Undecided,
            share: 1.0,
            evidence: BTreeMap::from([
                ("sender_cpu_pct".to_string(), 100.0 * s.busy),
                ("receiver_cpu_pct".to_string(), 100.0 * r.busy),
                ("rtt_us".to_string(), sq.rtt_us),
                ("cwnd_bytes".to_string(), sq.cwnd as f64),
            ]),
            fix: format!(
                "none to give: neither end's CPU was saturated (sender {:.0}%, receiver {:.0}%) and quinn lost nothing to speak of; its window ({} KB at {:.0} µs) or the path held it, and quinn does not say which",
                100.0 * s.busy,
                100.0 * r.busy,
                sq.cwnd / 1024,
                sq.rtt_us
            ),
        });
    }
    Some(Verdict {
        limits,
        missing: vec![
            "TCP's chrono accounting (QUIC has none in the kernel; quinn's window and RTT stand in)"
                .into(),
        ],
        phases: Vec::new(),
    })
}

fn saturated(
    who: &str,
    end: &EndpointReport,
    quic: &QuicStats,
    split: Split,
    factor: Factor,
) -> Limit {
    let kb = end.bytes as f64 / 1024.0;
    let (calls, datagrams, batch) = if who == "sender" {
        (
            quic.udp_sends,
            quic.datagrams_sent,
            if quic.gso {
                format!("GSO on, up to {} a call", quic.max_gso_segments)
            } else {
                "GSO off".to_string()
            },
        )
    } else {
        (
            quic.udp_receives,
            quic.datagrams_received,
            if quic.gso { "GRO on" } else { "GRO off" }.to_string(),
        )
    };
    let per = per_call(datagrams, calls);
    let mut evidence = BTreeMap::from([
        (format!("{who}_cpu_pct"), 100.0 * split.busy),
        (format!("{who}_encryption_pct"), 100.0 * split.encryption),
        (format!("{who}_kernel_pct"), 100.0 * split.kernel),
        (format!("{who}_quinn_pct"), 100.0 * split.quinn),
        ("datagrams_per_call".to_string(), per),
        (
            "encryption_ns_per_kb".to_string(),
            quic.crypto_s() * 1e9 / kb.max(1e-9),
        ),
    ]);
    if let Some(alone) = quic.cipher_alone {
        evidence.insert("cipher_alone_ns_per_kb".into(), alone.seal_ns_per_kb);
    }
    let largest = [
        ("encryption", split.encryption),
        ("kernel", split.kernel),
        ("quinn", split.quinn),
    ]
    .into_iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .map_or("quinn", |(name, _)| name);
    let fix = match largest {
        "encryption" => "the encryption is the largest part: a cipher this CPU does faster (netlab cksum's table), or connections spread over cores (-P)".to_string(),
        "kernel" if !quic.gso => "the kernel's part is the largest, one system call a datagram: let the kernel batch them (drop --no-gso)".to_string(),
        "kernel" => format!("the kernel's part is the largest, {per:.1} datagrams a call already: larger batches need a larger congestion window or fewer, larger packets (a higher MTU)"),
        _ => "quinn's own per-packet work is the largest part (each 1,200-1,450-byte packet framed, acknowledged and tracked in user space, where TCP's segments are the kernel's): spread connections over cores (-P)".to_string(),
    };
    Limit {
        factor,
        share: 1.0,
        evidence,
        fix: format!(
            "the {who}'s core was saturated ({:.0}%): {} of its CPU; {} {} calls of {per:.1} datagrams ({batch}): {fix}",
            100.0 * split.busy,
            split.words(),
            calls,
            if who == "sender" { "send" } else { "receive" },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::rusage::ProcessUsage;

    fn end(user_s: f64, sys_s: f64, quic: QuicStats) -> EndpointReport {
        EndpointReport {
            bytes: 1 << 30,
            wall_s: 1.0,
            usage: ProcessUsage {
                user_s,
                sys_s,
                ..Default::default()
            },
            quic: Some(quic),
            ..Default::default()
        }
    }

    fn stats(seal_s: f64, gso: bool) -> QuicStats {
        QuicStats {
            seal_s,
            gso,
            max_gso_segments: 64,
            udp_sends: 1000,
            datagrams_sent: 10_000,
            udp_receives: 5000,
            datagrams_received: 10_000,
            ..Default::default()
        }
    }

    #[test]
    fn a_saturated_sender_is_split_three_ways_and_the_largest_part_named() {
        // 0.2 s sealing, 0.5 s the rest of user time, 0.3 s the kernel.
        let s = end(0.7, 0.3, stats(0.2, true));
        let r = end(0.3, 0.2, stats(0.0, true));
        let v = verdict(&s, &r).unwrap();
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::SenderCpu);
        assert!(
            first.fix.contains("20% encryption, 30% the kernel")
                && first.fix.contains("50% the rest of quinn"),
            "{}",
            first.fix
        );
        assert!(
            first.fix.contains("quinn's own per-packet work"),
            "{}",
            first.fix
        );
        assert!(
            first
                .fix
                .contains("1000 send calls of 10.0 datagrams (GSO on, up to 64")
        );
        // The kernel the largest, GSO off: turn it on.
        let s = end(0.3, 0.65, stats(0.1, false));
        let v = verdict(&s, &r).unwrap();
        assert!(v.primary().unwrap().fix.contains("drop --no-gso"), "{v:?}");
        // Encryption the largest.
        let s = end(0.9, 0.05, stats(0.6, true));
        let v = verdict(&s, &r).unwrap();
        assert!(
            v.primary()
                .unwrap()
                .fix
                .contains("encryption is the largest")
        );
    }

    #[test]
    fn loss_and_nothing_saturated_are_said_and_tcp_streams_get_none() {
        let mut lossy = stats(0.01, true);
        lossy.lost_packets = 500;
        lossy.congestion_events = 7;
        let v = verdict(&end(0.2, 0.1, lossy), &end(0.2, 0.1, stats(0.0, true))).unwrap();
        assert_eq!(v.primary().unwrap().factor, Factor::Loss);
        assert!(
            v.primary()
                .unwrap()
                .fix
                .contains("5.0% of its packets lost")
        );
        let v = verdict(
            &end(0.2, 0.1, stats(0.01, true)),
            &end(0.2, 0.1, stats(0.0, true)),
        )
        .unwrap();
        assert_eq!(v.primary().unwrap().factor, Factor::Undecided);
        assert!(verdict(&EndpointReport::default(), &EndpointReport::default()).is_none());
    }
}

/// The transports of one `--quic` run side by side: TCP, TCP+TLS and QUIC
/// runs of one repeat index, each row their medians, the ratio to plain
/// TCP paired by run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Transport {
    pub name: String,
    pub runs: usize,
    /// The median rate, and the slowest and fastest run's.
    pub mbit_s: f64,
    pub mbit_s_range: [f64; 2],
    /// Median of each run's rate over the plain TCP run of its index.
    pub of_plain: Option<f64>,
    /// CPU seconds per GB moved, each end.
    pub sender_cpu_s_per_gb: f64,
    pub receiver_cpu_s_per_gb: f64,
    /// The share of each end's CPU in its record layer or packet keys.
    pub sender_encryption_pct: Option<f64>,
    pub receiver_encryption_pct: Option<f64>,
    /// Data-path system calls per MB, each end.
    pub sender_calls_per_mb: f64,
    pub receiver_calls_per_mb: f64,
    pub handshake_ms: Option<f64>,
}

fn kind(r: &crate::experiments::stream::record::Record) -> &'static str {
    match (r.data.params.tls, r.data.params.quic) {
        (_, Some(_)) => "QUIC",
        (Some(_), None) => "TCP+TLS",
        (None, None) => "TCP",
    }
}

type Measured<'a> = (
    &'a crate::experiments::stream::record::Record,
    &'a crate::experiments::stream::record::StreamResult,
);

fn median(v: Vec<f64>) -> Option<f64> {
    crate::record::stats::Spread::of(&v).map(|s| s.median)
}

/// One transport's row from its runs, its ratio paired with the plain TCP
/// run of each run's index among `all`.
fn row(name: &str, runs: &[Measured], all: &[Measured]) -> Transport {
    let plain_rate = |index: u32| {
        all.iter()
            .find(|(r, _)| kind(r) == "TCP" && r.data.params.repeat_index == index)
            .map(|(_, x)| x.figures.throughput_mbit_s)
    };
    let per_gb = |end: &EndpointReport| end.usage.cpu_s() / (end.bytes.max(1) as f64 / 1e9);
    let per_mb = |end: &EndpointReport| end.syscalls as f64 / (end.bytes.max(1) as f64 / 1e6);
    let share = |end: &EndpointReport| {
        let cpu = end.usage.cpu_s();
        let crypto = end
            .quic
            .as_ref()
            .map(|q| q.crypto_s())
            .or(end.tls.as_ref().map(|t| t.record_s))?;
        (cpu > 0.0).then(|| 100.0 * crypto / cpu)
    };
    let each = |f: &dyn Fn(&EndpointReport) -> f64, sender: bool| {
        median(
            runs.iter()
                .map(|(_, x)| f(if sender { &x.sender } else { &x.receiver }))
                .collect(),
        )
        .unwrap_or(0.0)
    };
    let handshake = |x: &crate::experiments::stream::record::StreamResult| {
        let s = &x.sender;
        match (&s.quic, &s.tls, s.handshake_s) {
            (Some(q), _, _) => Some(q.handshake_s),
            (None, Some(t), tcp) => Some(t.handshake_s + tcp.unwrap_or(0.0)),
            (None, None, tcp) => tcp,
        }
    };
    let rates = crate::record::stats::Spread::of(
        &runs
            .iter()
            .map(|(_, x)| x.figures.throughput_mbit_s)
            .collect::<Vec<_>>(),
    );
    Transport {
        name: name.to_string(),
        runs: runs.len(),
        mbit_s: rates.as_ref().map_or(0.0, |s| s.median),
        mbit_s_range: rates.as_ref().map_or([0.0; 2], |s| [s.min, s.max]),
        of_plain: median(
            runs.iter()
                .filter_map(|(r, x)| {
                    plain_rate(r.data.params.repeat_index)
                        .map(|p| x.figures.throughput_mbit_s / p.max(1e-9))
                })
                .collect(),
        ),
        sender_cpu_s_per_gb: each(&per_gb, true),
        receiver_cpu_s_per_gb: each(&per_gb, false),
        sender_encryption_pct: median(runs.iter().filter_map(|(_, x)| share(&x.sender)).collect()),
        receiver_encryption_pct: median(
            runs.iter()
                .filter_map(|(_, x)| share(&x.receiver))
                .collect(),
        ),
        sender_calls_per_mb: each(&per_mb, true),
        receiver_calls_per_mb: each(&per_mb, false),
        handshake_ms: median(
            runs.iter()
                .filter_map(|(_, x)| handshake(x))
                .map(|s| s * 1e3)
                .collect(),
        ),
    }
}

/// The rows of [`Transport`], None unless the records hold QUIC runs.
pub fn transports(
    records: &[crate::experiments::stream::record::Record],
) -> Option<Vec<Transport>> {
    use crate::experiments::stream::record::StreamData;
    let measured: Vec<Measured> = records
        .iter()
        .filter(|r| r.error.is_none())
        .filter_map(|r| match &r.data {
            StreamData {
                result: Some(result),
                ..
            } => Some((r, result.as_ref())),
            _ => None,
        })
        .collect();
    if !measured.iter().any(|(r, _)| kind(r) == "QUIC") {
        return None;
    }
    let mut rows = Vec::new();
    for name in ["TCP", "TCP+TLS", "QUIC"] {
        let runs: Vec<Measured> = measured
            .iter()
            .copied()
            .filter(|(r, _)| kind(r) == name)
            .collect();
        if !runs.is_empty() {
            rows.push(row(name, &runs, &measured));
        }
    }
    Some(rows)
}

/// The transports side by side, and the last QUIC run's own account.
pub fn transports_text(records: &[crate::experiments::stream::record::Record]) -> Option<String> {
    use crate::report::table::{new_table, num};
    let rows = transports(records)?;
    let mut table = new_table(&[
        "transport",
        "runs",
        "Mbit/s (min-max)",
        "of TCP (paired)",
        "CPU s/GB snd",
        "CPU s/GB rcv",
        "encryption % snd/rcv",
        "calls/MB snd/rcv",
        "handshake ms",
    ]);
    let pct = |x: Option<f64>| x.map_or("-".into(), |p| format!("{p:.0}"));
    for t in &rows {
        table.add_row(vec![
            t.name.clone(),
            t.runs.to_string(),
            if t.runs > 1 {
                format!(
                    "{} ({}-{})",
                    num(t.mbit_s),
                    num(t.mbit_s_range[0]),
                    num(t.mbit_s_range[1])
                )
            } else {
                num(t.mbit_s)
            },
            t.of_plain.map_or("-".into(), |r| format!("{r:.2}")),
            num(t.sender_cpu_s_per_gb),
            num(t.receiver_cpu_s_per_gb),
            format!(
                "{}/{}",
                pct(t.sender_encryption_pct),
                pct(t.receiver_encryption_pct)
            ),
            format!(
                "{}/{}",
                num(t.sender_calls_per_mb),
                num(t.receiver_calls_per_mb)
            ),
            t.handshake_ms.map_or("-".into(), |m| format!("{m:.2}")),
        ]);
    }
    let mut out = format!(
        "TCP, TCP+TLS and QUIC on the same host and path, same run (rotating order):\n{table}\n"
    );
    let last = records.iter().rev().find_map(|r| match &r.data {
        crate::experiments::stream::record::StreamData {
            result: Some(result),
            ..
        } if r.data.params.quic.is_some() => Some(result),
        _ => None,
    });
    if let Some(result) = last
        && let (Some(sq), Some(rq)) = (&result.sender.quic, &result.receiver.quic)
    {
        let (s, r) = (
            Split::of(&result.sender, sq),
            Split::of(&result.receiver, rq),
        );
        out.push_str(&format!(
            "QUIC, last run ({} by {}): the sender {:.0}% busy, {}; {} packets sealed at {:.0} ns each, {} send calls of {:.1} datagrams ({}). The receiver {:.0}% busy, {}; {} receive calls of {:.1} datagrams (GRO {}). quinn lost {} packets, RTT {:.0} µs, MTU {}.\n",
            sq.suite,
            sq.library,
            100.0 * s.busy,
            s.words(),
            sq.sealed_packets,
            sq.seal_s * 1e9 / sq.sealed_packets.max(1) as f64,
            sq.udp_sends,
            per_call(sq.datagrams_sent, sq.udp_sends),
            if sq.gso {
                format!("GSO on, up to {} a call", sq.max_gso_segments)
            } else {
                "GSO off".to_string()
            },
            100.0 * r.busy,
            r.words(),
            rq.udp_receives,
            per_call(rq.datagrams_received, rq.udp_receives),
            if rq.gso { "on" } else { "off" },
            sq.lost_packets,
            sq.rtt_us,
            sq.mtu
        ));
    }
    Some(out)
}
