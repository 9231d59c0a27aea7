//! `--tls` beside plain TCP (#65): the runs of one `netlab stream --tls`
//! paired by their repeat index, the encrypted stream's throughput and CPU
//! per KB against its plain twin's, each side's time sealing or opening
//! records, and what bounded it: the lower of plain TCP's rate and the
//! cipher's own on the sender's core, and the rate a sender that pays
//! both costs in turn could reach.
//!
//! Ratios are paired (each TLS run over the plain run beside it) and
//! summarised by their median, so a host whose speed drifts between pairs
//! moves both halves of a pair alike.

use crate::experiments::stream::record::{Record, StreamData, StreamResult};
use crate::record::stats::Spread;
use crate::report::table::{new_table, num};
use serde::Serialize;
use std::fmt::Write;

/// The comparison, as the text and the JSON summary give it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TlsBeside {
    pub pairs: usize,
    pub suite: String,
    pub library: String,
    pub kernel_tls: String,
    pub record_bytes: usize,
    pub tls_mbit_s: Spread,
    pub plain_mbit_s: Spread,
    /// Each pair's TLS throughput over its plain twin's.
    pub ratio: Spread,
    pub sender_us_per_kb: [f64; 2],
    pub receiver_us_per_kb: [f64; 2],
    /// Medians over the TLS runs: the record layer's share of each side's
    /// CPU time and its cost per KB of plaintext.
    pub sealing_share: f64,
    pub sealing_ns_per_kb: f64,
    pub opening_share: f64,
    pub opening_ns_per_kb: f64,
    /// The cipher alone on the sender's core (median over runs).
    pub cipher_alone_ns_per_kb: Option<f64>,
    pub cipher_alone_mbit_s: Option<f64>,
    /// The lower of plain TCP's median and the cipher's own rate, and
    /// which it was.
    pub lower_bound_mbit_s: f64,
    pub bound_by: String,
    /// The TLS median over that bound.
    pub of_bound: f64,
    /// A sender that pays plain TCP's CPU per KB and then the sealing's,
    /// one after the other on one core: its rate, Mbit/s.
    pub in_series_mbit_s: Option<f64>,
    pub tls_handshake_ms: f64,
    pub tcp_handshake_ms: Option<f64>,
}

fn result(r: &Record) -> Option<&StreamResult> {
    match &r.data {
        StreamData {
            result: Some(result),
            ..
        } if r.error.is_none() => Some(result.as_ref()),
        _ => None,
    }
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    Spread::of(&values.collect::<Vec<_>>()).map(|s| s.median)
}

/// A `--tls` run's records (its TLS runs and their plain twins: the same
/// parameters but TLS), and the rest.
pub fn split(records: &[Record]) -> (Vec<Record>, Vec<Record>) {
    let encrypted = |r: &Record| r.data.params.tls.is_some() || r.data.params.quic.is_some();
    let bare = |r: &Record| {
        let mut params = r.data.params.clone();
        params.tls = None;
        params.quic = None;
        params
    };
    let runs: Vec<&Record> = records.iter().filter(|r| encrypted(r)).collect();
    records
        .iter()
        .cloned()
        .partition(|r| encrypted(r) || runs.iter().any(|t| bare(t) == r.data.params))
}

/// Each measured TLS run with the plain run of its repeat index.
fn pairs(records: &[Record]) -> Vec<(&StreamResult, &StreamResult)> {
    let measured: Vec<(&Record, &StreamResult)> = records
        .iter()
        .filter_map(|r| result(r).map(|x| (r, x)))
        .collect();
    let is_tls = |r: &Record| r.data.params.tls.is_some();
    let is_plain = |r: &Record| r.data.params.tls.is_none() && r.data.params.quic.is_none();
    measured
        .iter()
        .filter(|(r, _)| is_tls(r))
        .filter_map(|(r, tls)| {
            let index = r.data.params.repeat_index;
            measured
                .iter()
                .find(|(p, _)| is_plain(p) && p.data.params.repeat_index == index)
                .map(|(_, plain)| (*tls, *plain))
        })
        .collect()
}

/// The median share of a side's CPU its record layer took over the TLS
/// runs, and the median ns per KB of plaintext; the sender's or the
/// receiver's.
fn record_layer(pairs: &[(&StreamResult, &StreamResult)], sender: bool) -> (f64, f64) {
    let sides = || {
        pairs
            .iter()
            .map(move |(t, _)| if sender { &t.sender } else { &t.receiver })
    };
    let share = median(sides().filter_map(|side| {
        let cpu = side.usage.cpu_s();
        side.tls
            .as_ref()
            .filter(|_| cpu > 0.0)
            .map(|x| x.record_s / cpu)
    }));
    let per_kb = median(sides().filter_map(|side| {
        let kb = side.bytes as f64 / 1024.0;
        side.tls
            .as_ref()
            .filter(|_| kb > 0.0)
            .map(|x| x.record_s * 1e9 / kb)
    }));
    (share.unwrap_or(0.0), per_kb.unwrap_or(0.0))
}

/// The pairs of a `--tls` run: None unless it has both TLS runs and plain
/// twins that measured.
pub fn compare(records: &[Record]) -> Option<TlsBeside> {
    let pairs = pairs(records);
    let (first, _) = pairs.first()?;
    let stats = first.sender.tls.as_ref()?;
    let tls_mbit_s = Spread::of(
        &pairs
            .iter()
            .map(|(t, _)| t.figures.throughput_mbit_s)
            .collect::<Vec<_>>(),
    )?;
    let plain_mbit_s = Spread::of(
        &pairs
            .iter()
            .map(|(_, p)| p.figures.throughput_mbit_s)
            .collect::<Vec<_>>(),
    )?;
    let ratio = Spread::of(
        &pairs
            .iter()
            .map(|(t, p)| t.figures.throughput_mbit_s / p.figures.throughput_mbit_s)
            .collect::<Vec<_>>(),
    )?;
    let tls_runs = || pairs.iter().map(|(t, _)| *t);
    let (sealing_share, sealing_ns_per_kb) = record_layer(&pairs, true);
    let (opening_share, opening_ns_per_kb) = record_layer(&pairs, false);
    let alone = median(tls_runs().filter_map(|t| {
        t.sender
            .tls
            .as_ref()
            .and_then(|x| x.cipher_alone)
            .map(|c| c.seal_ns_per_kb)
    }));
    let alone_mbit_s = alone.map(|ns| 8.0 * 1024.0 * 1e3 / ns.max(1e-9));
    let (lower_bound_mbit_s, bound_by) = match alone_mbit_s {
        Some(cipher) if cipher < plain_mbit_s.median => (cipher, "the cipher alone".to_string()),
        _ => (plain_mbit_s.median, "plain TCP".to_string()),
    };
    let plain_sender_us_per_kb = median(pairs.iter().map(|(_, p)| p.figures.sender_us_per_kb));
    // Only where plain TCP's sender was CPU-bound does its CPU per KB set
    // its rate; then the two costs add.
    let plain_bound = pairs
        .iter()
        .filter(|(_, p)| p.figures.sender_cpu_pct >= 85.0)
        .count()
        * 2
        > pairs.len();
    let in_series_mbit_s = plain_sender_us_per_kb
        .filter(|_| plain_bound && sealing_ns_per_kb > 0.0)
        .map(|us| 8.0 * 1024.0 / (us * 1e3 + sealing_ns_per_kb) * 1e3);
    let both = |f: fn(&StreamResult) -> f64| {
        [
            median(pairs.iter().map(|(t, _)| f(t))).unwrap_or(0.0),
            median(pairs.iter().map(|(_, p)| f(p))).unwrap_or(0.0),
        ]
    };
    Some(TlsBeside {
        pairs: pairs.len(),
        suite: stats.suite.clone(),
        library: stats.library.clone(),
        kernel_tls: stats.kernel_tls.describe(),
        record_bytes: stats.record_bytes,
        of_bound: tls_mbit_s.median / lower_bound_mbit_s.max(1e-9),
        tls_mbit_s,
        plain_mbit_s,
        ratio,
        sender_us_per_kb: both(|r| r.figures.sender_us_per_kb),
        receiver_us_per_kb: both(|r| r.figures.receiver_us_per_kb),
        sealing_share,
        sealing_ns_per_kb,
        opening_share,
        opening_ns_per_kb,
        cipher_alone_ns_per_kb: alone,
        cipher_alone_mbit_s: alone_mbit_s,
        lower_bound_mbit_s,
        bound_by,
        in_series_mbit_s,
        tls_handshake_ms: 1e3
            * median(tls_runs().filter_map(|t| t.sender.tls.as_ref().map(|x| x.handshake_s)))
                .unwrap_or(0.0),
        tcp_handshake_ms: median(tls_runs().filter_map(|t| t.sender.handshake_s)).map(|s| s * 1e3),
    })
}

/// The comparison's table: TLS and plain TCP row by row.
fn beside_table(c: &TlsBeside) -> String {
    let mut table = new_table(&["", "TLS", "plain TCP", "TLS / plain"]);
    table.add_row(vec![
        "Mbit/s (median)".into(),
        num(c.tls_mbit_s.median),
        num(c.plain_mbit_s.median),
        format!(
            "{:.2} (pairs {:.2} to {:.2})",
            c.ratio.median, c.ratio.min, c.ratio.max
        ),
    ]);
    for (label, [tls, plain]) in [
        ("sender µs/KB", c.sender_us_per_kb),
        ("receiver µs/KB", c.receiver_us_per_kb),
    ] {
        table.add_row(vec![
            label.into(),
            num(tls),
            num(plain),
            format!("{:.2}", tls / plain.max(1e-12)),
        ]);
    }
    table.add_row(vec![
        "sender sealing records".into(),
        format!(
            "{:.0}% of its CPU, {:.0} ns/KB",
            100.0 * c.sealing_share,
            c.sealing_ns_per_kb
        ),
        "-".into(),
        String::new(),
    ]);
    table.add_row(vec![
        "receiver opening records".into(),
        format!(
            "{:.0}% of its CPU, {:.0} ns/KB",
            100.0 * c.opening_share,
            c.opening_ns_per_kb
        ),
        "-".into(),
        String::new(),
    ]);
    table.add_row(vec![
        "handshake (ms)".into(),
        format!(
            "TCP {} + TLS {:.2}",
            c.tcp_handshake_ms.map_or("-".into(), |m| format!("{m:.2}")),
            c.tls_handshake_ms
        ),
        c.tcp_handshake_ms
            .map_or("-".into(), |m| format!("TCP {m:.2}")),
        String::new(),
    ]);
    table.to_string()
}

/// The comparison as the stream section prints it.
pub fn tls_text(c: &TlsBeside) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "TLS beside plain TCP (same run, alternating, {} pair{}): {} by {}, {}-byte records; {}",
        c.pairs,
        if c.pairs == 1 { "" } else { "s" },
        c.suite,
        c.library,
        c.record_bytes,
        c.kernel_tls
    );
    let _ = writeln!(out, "{}", beside_table(c));
    let alone = match (c.cipher_alone_ns_per_kb, c.cipher_alone_mbit_s) {
        (Some(ns), Some(mbit)) => format!(
            "the cipher alone on the sender's core seals {}-byte records at {ns:.0} ns/KB ({} Mbit/s)",
            c.record_bytes,
            num(mbit)
        ),
        _ => "the cipher alone was not timed".into(),
    };
    let _ = write!(
        out,
        "what bounds TLS here: {alone}; plain TCP ran at {} Mbit/s; the lower is {}, and TLS reached {:.2} of it",
        num(c.plain_mbit_s.median),
        c.bound_by,
        c.of_bound
    );
    match c.in_series_mbit_s {
        Some(series) => {
            let of_series = c.tls_mbit_s.median / series.max(1e-9);
            let rest = c.sender_us_per_kb[0] - c.sealing_ns_per_kb / 1e3;
            let _ = write!(
                out,
                ". Plain TCP's sender was CPU-bound, so the sealing adds to its cost on the same core: paying {:.3} µs/KB of plain TCP and then {:.0} ns/KB of sealing, a sender reaches {} Mbit/s, and TLS reached {of_series:.2} of that",
                c.sender_us_per_kb[1],
                c.sealing_ns_per_kb,
                num(series),
            );
            if of_series > 1.05 {
                let _ = write!(
                    out,
                    " (above 1: the TLS sender's CPU outside the sealing came to {rest:.3} µs/KB against plain TCP's {:.3}, its writes fewer and larger)",
                    c.sender_us_per_kb[1]
                );
            }
            out.push('\n');
        }
        None => out.push_str(".\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::bulk::types::TlsStats;
    use crate::experiments::stream::record::fixture_stream_run;

    fn run(index: u32, tls: bool, mbit: f64, sender_us_per_kb: f64) -> Record {
        let mut record = fixture_stream_run();
        record.data.params.repeat_index = index;
        record.data.params.tls = tls.then_some(crate::endpoint::tls::TlsChoice {
            cipher: crate::checksum::aead::Cipher::Aes128Gcm,
            record: None,
        });
        let result = record.data.result.as_mut().unwrap();
        result.figures.throughput_mbit_s = mbit;
        result.figures.sender_us_per_kb = sender_us_per_kb;
        result.figures.sender_cpu_pct = 99.0;
        result.sender.bytes = 1 << 30;
        result.sender.usage.user_s = 0.5;
        result.sender.usage.sys_s = 0.5;
        if tls {
            result.sender.tls = Some(TlsStats {
                suite: "TLS13_AES_128_GCM_SHA256".into(),
                version: "TLSv1_3".into(),
                library: "rustls".into(),
                handshake_s: 0.001,
                // 0.1 s for 1 GiB: ~95 ns per KB, a tenth of the CPU.
                record_s: 0.1,
                record_bytes: 16384,
                cipher_alone: Some(crate::checksum::aead::CipherRate {
                    record: 16384,
                    seal_ns_per_kb: 80.0,
                    open_ns_per_kb: 80.0,
                }),
                ..TlsStats::default()
            });
        }
        record
    }

    #[test]
    fn pairs_are_matched_by_run_and_the_bound_is_the_lower_of_plain_tcp_and_the_cipher() {
        let records = vec![
            run(0, false, 30_000.0, 0.25),
            run(0, true, 24_000.0, 0.33),
            run(1, true, 20_000.0, 0.33),
            run(1, false, 25_000.0, 0.25),
        ];
        let c = compare(&records).unwrap();
        assert_eq!(c.pairs, 2);
        // Paired: 0.8 and 0.8, though the medians' ratio is 22/27.5.
        assert!((c.ratio.median - 0.8).abs() < 1e-9, "{c:?}");
        assert_eq!(c.bound_by, "plain TCP");
        assert!((c.lower_bound_mbit_s - 27_500.0).abs() < 1e-6);
        assert!((c.sealing_share - 0.1).abs() < 1e-9);
        // 0.1 s over 2^20 KB.
        assert!((c.sealing_ns_per_kb - 0.1e9 / 1048576.0).abs() < 1e-6);
        // 0.25 µs/KB + 95 ns/KB in series.
        let series = c.in_series_mbit_s.unwrap();
        let expect = 8.0 * 1024.0 / (250.0 + c.sealing_ns_per_kb) * 1e3;
        assert!((series - expect).abs() < 1e-6, "{series} {expect}");
        let text = tls_text(&c);
        assert!(text.contains("TLS beside plain TCP (same run, alternating, 2 pairs)"));
        assert!(text.contains("the lower is plain TCP"), "{text}");
        // A cipher slower than plain TCP is the bound.
        let mut slow = records.clone();
        for r in &mut slow {
            if let Some(t) = r.data.result.as_mut().unwrap().sender.tls.as_mut() {
                t.cipher_alone.as_mut().unwrap().seal_ns_per_kb = 800.0;
            }
        }
        assert_eq!(compare(&slow).unwrap().bound_by, "the cipher alone");
        // No twins, no comparison.
        assert!(compare(&records[1..3]).is_none());
        // The twins go with their TLS runs; another plain run does not.
        let mut other = run(0, false, 1.0, 0.1);
        other.data.params.record += 1;
        let mut all = records.clone();
        all.push(other);
        let (tls, rest) = split(&all);
        assert_eq!((tls.len(), rest.len()), (4, 1));
        assert_eq!(
            rest[0].data.params.record,
            records[0].data.params.record + 1
        );
    }
}
