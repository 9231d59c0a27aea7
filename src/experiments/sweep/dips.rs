//! Dips in a throughput-vs-size curve and what the records say about them.
//!
//! A dip is a size whose every run is slower than every run at both
//! neighbouring sizes (beyond the runs' own spread, so noise alone cannot
//! make one), by at least [`MIN_SHORTFALL`] against the neighbours'
//! geometric mean. Each dip is set against its neighbours on the figures the
//! records carry that are known to move loopback throughput by tens of
//! percent: whether the two ends ran on one CPU (`cpus`), the mean segment
//! size (TCP_INFO), a runt segment when a record just exceeds a multiple
//! of the MSS, TCP autocorking (`TcpExt.TCPAutoCorking`), the
//! receiver's reads per record and the sender's sleeps per record (waiting
//! for room in its send buffer, i.e. for the receiver). What differs is named; when nothing does,
//! the dip is reported as unexplained rather than left out.

use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::experiments::stream::record::StreamResult;
use crate::record::stats::Spread;

/// The least shortfall against the neighbours that counts as a dip.
pub const MIN_SHORTFALL: f64 = 0.10;

/// One dip and the figures that set it apart.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dip {
    pub record: u64,
    /// Median throughput here, and the neighbours' geometric mean, MB/s.
    pub median_mb_s: f64,
    pub expected_mb_s: f64,
    /// Percent below the expected.
    pub shortfall_pct: f64,
    /// What differs from the neighbours, in words; empty: unexplained.
    pub evidence: Vec<String>,
}

/// One run's figures that a dip is judged on.
struct Run {
    throughput: f64,
    shared_core: Option<bool>,
    segment_bytes: Option<f64>,
    autocork_per_record: f64,
    reads_per_record: f64,
    /// The sender's sleeps (voluntary context switches) per record: it
    /// waited for room in its send buffer, i.e. for the receiver.
    sender_sleeps_per_record: f64,
    /// The sender's MSS, when known.
    mss: Option<u32>,
}

fn run(record: u64, r: &StreamResult) -> Run {
    let records_sent = (r.sender.bytes as f64 / record as f64).max(1.0);
    Run {
        throughput: r.figures.throughput_mb_s,
        shared_core: r
            .sender
            .cpus
            .zip(r.receiver.cpus)
            .map(|((_, sender), (_, receiver))| sender == receiver),
        segment_bytes: r.figures.mean_segment_bytes,
        autocork_per_record: r.sender.counters.get("TcpExt.TCPAutoCorking") as f64 / records_sent,
        reads_per_record: r.receiver.syscalls as f64 / records_sent,
        sender_sleeps_per_record: r.sender.usage.voluntary_cs as f64 / records_sent,
        mss: r
            .sender
            .mss
            .or(r.sender.tcp_info.as_ref().map(|t| t.snd_mss)),
    }
}

fn median(runs: &[Run], figure: impl Fn(&Run) -> Option<f64>) -> Option<f64> {
    Spread::of(&runs.iter().filter_map(figure).collect::<Vec<_>>()).map(|s| s.median)
}

/// A figure's medians here and at each neighbour, when all three have it.
fn medians(
    here: &[Run],
    left: &[Run],
    right: &[Run],
    figure: impl Fn(&Run) -> Option<f64> + Copy,
) -> Option<(f64, f64, f64)> {
    Some((
        median(here, figure)?,
        median(left, figure)?,
        median(right, figure)?,
    ))
}

/// How many runs had both ends on one CPU, of those that say.
fn shared_core<'a>(runs: impl Iterator<Item = &'a Run>) -> (usize, usize) {
    runs.filter_map(|r| r.shared_core)
        .fold((0, 0), |(shared, known), s| {
            (shared + usize::from(s), known + 1)
        })
}

/// `here` differs from both neighbours by more than `factor`, the same way.
fn apart(here: f64, left: f64, right: f64, factor: f64) -> bool {
    (here > left * factor && here > right * factor)
        || (here * factor < left && here * factor < right)
}

/// The share of an MSS left over when a record is cut into full segments:
/// a record just over a multiple of the MSS leaves a runt segment that
/// costs a packet's fixed cost for a few bytes.
fn runt(record: u64, mss: u32) -> Option<u64> {
    let mss = u64::from(mss);
    (mss > 0 && record > mss)
        .then(|| record % mss)
        .filter(|&rest| rest > 0 && rest * 20 < mss)
}

fn evidence(record: u64, here: &[Run], left: &[Run], right: &[Run]) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(mss) = here.iter().find_map(|r| r.mss)
        && let Some(rest) = runt(record, mss)
    {
        let full = record / u64::from(mss);
        // The segments show whether the rest really left on its own.
        let per_record = record as f64 / (full + 1) as f64;
        let segment = median(here, |r| r.segment_bytes);
        found.push(match segment {
            Some(seen) if (seen / per_record - 1.0).abs() < 0.1 => format!(
                "a {record}-byte record is {full} full segment(s) of the {mss}-byte MSS and {rest} bytes more, and segments here averaged {seen:.0} bytes, {} to a record: each record pays one more packet's fixed cost for {rest} bytes",
                full + 1
            ),
            _ => format!(
                "a {record}-byte record is {full} full segment(s) of the {mss}-byte MSS and {rest} bytes more (whether the rest left as a runt, the segment sizes do not show)"
            ),
        });
    }
    let (s_here, n_here) = shared_core(here.iter());
    let (s_around, n_around) = shared_core(left.iter().chain(right));
    if n_here > 0 && n_around > 0 {
        let share = |s: usize, n: usize| s as f64 / n as f64;
        if (share(s_here, n_here) - share(s_around, n_around)).abs() >= 0.5 {
            found.push(format!(
                "the two ends shared a CPU in {s_here} of {n_here} runs here, {s_around} of {n_around} at the neighbours"
            ));
        }
    }
    if let Some((h, l, r)) = medians(here, left, right, |r| r.segment_bytes)
        && apart(h, l, r, 1.25)
    {
        found.push(format!(
            "segments averaged {h:.0} bytes here against {l:.0} and {r:.0} either side"
        ));
    }
    if let Some((h, l, r)) = medians(here, left, right, |r| Some(r.autocork_per_record))
        && (h - l.max(r)).abs().max((h - l.min(r)).abs()) > 0.05
        && apart(h + 0.01, l + 0.01, r + 0.01, 2.0)
    {
        found.push(format!(
            "TCP autocorked {h:.2} times a record here against {l:.2} and {r:.2} either side"
        ));
    }
    if let Some((h, l, r)) = medians(here, left, right, |r| Some(r.reads_per_record))
        && apart(h, l, r, 1.5)
    {
        found.push(format!(
            "the receiver made {h:.2} reads a record here against {l:.2} and {r:.2} either side"
        ));
    }
    if let Some((h, l, r)) = medians(here, left, right, |r| Some(r.sender_sleeps_per_record))
        && (h - l).abs().max((h - r).abs()) > 0.05
        && apart(h + 0.01, l + 0.01, r + 0.01, 1.5)
    {
        found.push(format!(
            "the sender slept {h:.2} times a record waiting for buffer room here against {l:.2} and {r:.2} either side"
        ));
    }
    found
}

/// The dips of the stream records' curve (successful runs, by record size).
pub fn dips(records: &[Record]) -> Vec<Dip> {
    let mut sizes: Vec<(u64, Vec<Run>)> = Vec::new();
    for r in records {
        if let StreamData {
            params,
            result: Some(result),
        } = &r.data
        {
            let one = run(params.record, result);
            match sizes.iter_mut().find(|(s, _)| *s == params.record) {
                Some((_, runs)) => runs.push(one),
                None => sizes.push((params.record, vec![one])),
            }
        }
    }
    sizes.sort_by_key(|(s, _)| *s);
    let mut found = Vec::new();
    for window in sizes.windows(3) {
        let [(_, left), (size, here), (_, right)] = window else {
            continue;
        };
        // Beyond the noise needs a spread at each of the three sizes.
        if here.len() < 2 || left.len() < 2 || right.len() < 2 {
            continue;
        }
        let fastest_here = here.iter().map(|r| r.throughput).fold(f64::MIN, f64::max);
        let slowest_around = left
            .iter()
            .chain(right)
            .map(|r| r.throughput)
            .fold(f64::MAX, f64::min);
        let Some((m, l, r)) = medians(here, left, right, |r| Some(r.throughput)) else {
            continue;
        };
        let expected = (l * r).sqrt();
        let shortfall = 1.0 - m / expected;
        if fastest_here < slowest_around && shortfall >= MIN_SHORTFALL {
            found.push(Dip {
                record: *size,
                median_mb_s: m,
                expected_mb_s: expected,
                shortfall_pct: shortfall * 100.0,
                evidence: evidence(*size, here, left, right),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(record: u64, mb_s: f64, shared: bool, segment: f64) -> Record {
        let mut r = crate::experiments::stream::record::fixture_stream_run();
        if let StreamData {
            params,
            result: Some(result),
        } = &mut r.data
        {
            params.record = record;
            result.figures.throughput_mb_s = mb_s;
            result.figures.mean_segment_bytes = Some(segment);
            result.sender.cpus = Some((0, 0));
            result.receiver.cpus = Some((0, if shared { 0 } else { 1 }));
        }
        r
    }

    #[test]
    fn a_dip_beyond_the_noise_is_found_and_what_differs_is_named() {
        let mut records = Vec::new();
        for (mb_s, segment) in [(1000.0, 16000.0), (1010.0, 16500.0)] {
            records.push(at(16384, mb_s, false, segment));
        }
        // 32K: slower than every neighbouring run, on one shared CPU.
        for mb_s in [700.0, 720.0] {
            records.push(at(32768, mb_s, true, 30000.0));
        }
        for mb_s in [1200.0, 1190.0] {
            records.push(at(65536, mb_s, false, 45000.0));
        }
        let found = dips(&records);
        assert_eq!(found.len(), 1, "{found:?}");
        let dip = &found[0];
        assert_eq!(dip.record, 32768);
        assert!((dip.expected_mb_s - (1005.0f64 * 1195.0).sqrt()).abs() < 1e-9);
        assert!(dip.shortfall_pct > 25.0);
        assert_eq!(
            dip.evidence,
            ["the two ends shared a CPU in 2 of 2 runs here, 0 of 4 at the neighbours"]
        );
    }

    #[test]
    fn a_dip_where_each_record_leaves_a_runt_segment_says_so() {
        let mut records = Vec::new();
        for (size, mb_s, segment) in [
            (32768, 2200.0, 34000.0),
            (32768, 2250.0, 34000.0),
            (65536, 1550.0, 32900.0),
            (65536, 1600.0, 32800.0),
            (131072, 2400.0, 47000.0),
            (131072, 2450.0, 47000.0),
        ] {
            let mut r = at(size, mb_s, false, segment);
            if let StreamData {
                result: Some(result),
                ..
            } = &mut r.data
            {
                result.sender.mss = Some(65483);
            }
            records.push(r);
        }
        let found = dips(&records);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].record, 65536);
        assert!(
            found[0].evidence[0].contains(
                "and 53 bytes more, and segments here averaged 32850 bytes, 2 to a record"
            ),
            "{:?}",
            found[0].evidence
        );
    }

    #[test]
    fn a_record_just_over_the_mss_leaves_a_runt() {
        // Loopback's MSS: a 64 KB record is one segment and 53 bytes.
        assert_eq!(runt(65536, 65483), Some(53));
        assert_eq!(runt(32768, 65483), None, "under one segment");
        assert_eq!(runt(131072, 65483), Some(106));
        assert_eq!(runt(98304, 65483), None, "half a segment is no runt");
        assert_eq!(runt(2 * 1448, 1448), None, "whole segments");
    }

    #[test]
    fn runs_that_overlap_a_neighbours_are_noise_and_a_dip_with_nothing_apart_is_unexplained() {
        let overlapping = vec![
            at(1024, 500.0, false, 9000.0),
            at(1024, 520.0, false, 9000.0),
            at(2048, 430.0, false, 12000.0),
            at(2048, 505.0, false, 12000.0),
            at(4096, 800.0, false, 16000.0),
            at(4096, 810.0, false, 16000.0),
        ];
        assert!(
            dips(&overlapping).is_empty(),
            "one 2K run is as fast as a 1K run"
        );
        let unexplained = vec![
            at(1024, 500.0, false, 9000.0),
            at(1024, 520.0, false, 9000.0),
            at(2048, 300.0, false, 12000.0),
            at(2048, 310.0, false, 12000.0),
            at(4096, 800.0, false, 16000.0),
            at(4096, 810.0, false, 16000.0),
        ];
        let found = dips(&unexplained);
        assert_eq!(found.len(), 1);
        assert!(found[0].evidence.is_empty());
        // One run a size says nothing about noise.
        assert!(dips(&unexplained[..1]).is_empty());
    }
}
