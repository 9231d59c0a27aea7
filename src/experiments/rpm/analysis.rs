//! What an rpm run's raw samples say, by the draft's rules
//! (`analysis::responsiveness`): the window of intervals the result is
//! taken over, the trimmed means, RPM (foreign, self, combined), the
//! confidence, idle against working latency, the tier and the
//! bufferbloat grade. The same functions decide saturation live in the
//! measuring end and recompute the result from the record, so a reader
//! can check every figure against the samples kept beside it.

use super::record::{AGREE_FLOOR_MS, Compared, MedianSpread, SideBySide, Summary};
use crate::analysis::responsiveness::{
    Confidence, DRAFT, Grade, Params, ProbeMeans, Stability, Tier, trimmed_mean,
};
use crate::endpoint::rpm::saturation::{
    goodput_saturation, in_window, means_over, responsiveness_saturation,
};
use crate::endpoint::rpm::types::{ClientReport, Ending, ProbeKind, Sample};
use crate::measure::irtt::IrttRun;

/// The formula, as the report shows it beside the figure.
pub const FORMULA: &str = "RPM = (60000 / ((TM(tcp_f) + TM(http_f)) / 2) + 60000 / TM(http_l)) / 2, TM the trimmed mean keeping the lowest 95% (draft-ietf-ippm-responsiveness-06, the TCP-only case)";

/// Bootstrap resamples behind [`rpm_interval`].
pub const RPM_RESAMPLES: usize = 400;

/// RPM's 95% interval over the window's probes: each probe kind's samples
/// resampled with replacement (a fixed seed, so a report rebuilt from the
/// record gives the same interval), the draft's trimmed means and formula
/// applied to each resample, the 2.5% and 97.5% points taken.
pub fn rpm_interval(
    samples: &[Sample],
    params: &Params,
    first: usize,
    last: usize,
) -> Option<[f64; 2]> {
    let of = |kind| in_window(samples, params.id_s, first, last, kind);
    let kinds = [
        of(ProbeKind::TcpForeign),
        of(ProbeKind::RequestForeign),
        of(ProbeKind::RequestLoaded),
    ];
    if kinds.iter().any(|k| k.len() < 2) {
        return None;
    }
    let mut draws = crate::analysis::stats::Draws::default();
    let mut rpms: Vec<f64> = (0..RPM_RESAMPLES)
        .filter_map(|_| {
            let mut resample =
                |k: &[f64]| -> Vec<f64> { (0..k.len()).map(|_| k[draws.below(k.len())]).collect() };
            let (a, b, c) = (
                resample(&kinds[0]),
                resample(&kinds[1]),
                resample(&kinds[2]),
            );
            ProbeMeans::of(&a, &b, &c, params.tmp).map(|m| m.rpm().combined)
        })
        .collect();
    if rpms.is_empty() {
        return None;
    }
    rpms.sort_by(f64::total_cmp);
    let at = |q: f64| rpms[((rpms.len() - 1) as f64 * q).round() as usize];
    Some([at(0.025), at(0.975)])
}

/// The window's RPM (combined, foreign and self), its tier, the working
/// round trip and (beside the idle one) its grades, from the window's
/// trimmed means.
fn with_rpm(summary: &mut Summary, means: &ProbeMeans) {
    let rpm = means.rpm();
    summary.tm_tcp_f_ms = Some(means.tcp_f);
    summary.tm_http_f_ms = Some(means.http_f);
    summary.tm_http_l_ms = Some(means.http_l);
    summary.rpm_foreign = Some(rpm.foreign);
    summary.rpm_self = Some(rpm.loaded);
    summary.rpm = Some(rpm.combined);
    summary.tier = Some(Tier::of_rpm(rpm.combined).name().to_string());
    let working = 60_000.0 / rpm.combined;
    summary.working_ms = Some(working);
    if let Some(idle) = summary.idle_ms {
        let added = (working - idle).max(0.0);
        summary.added_ms = Some(added);
        summary.grade = Some(Grade::of_added_ms(added).name().to_string());
        summary.grade_loaded = Some(
            Grade::of_added_ms((means.http_l - idle).max(0.0))
                .name()
                .to_string(),
        );
    }
}

/// The summary of a run's raw figures.
pub fn summarise(report: &ClientReport, params: Params) -> Summary {
    let mad = params.mad.max(1);
    let n = report.intervals.len();
    let mut summary = Summary {
        draft: DRAFT.to_string(),
        formula: FORMULA.to_string(),
        confidence: Confidence::Low.name().to_string(),
        ..Default::default()
    };
    let idle: Vec<f64> = report
        .idle
        .iter()
        .filter(|s| s.kind == ProbeKind::RequestForeign)
        .map(|s| s.ms)
        .collect();
    summary.idle_ms = trimmed_mean(&idle, params.tmp);
    if n == 0 {
        summary
            .notes
            .push("no interval under load completed".into());
        return summary;
    }
    let goodput: Vec<f64> = report
        .intervals
        .iter()
        .map(|i| i.goodput_down_bps + i.goodput_up_bps)
        .collect();
    let last = n - 1;
    let window = (last + 1).saturating_sub(mad)..=last;
    let average = |f: fn(&crate::endpoint::rpm::types::Interval) -> f64| {
        report.intervals[window.clone()].iter().map(f).sum::<f64>() / window.clone().count() as f64
    };
    summary.goodput_down_bps = average(|i| i.goodput_down_bps);
    summary.goodput_up_bps = average(|i| i.goodput_up_bps);
    summary.connections = report.intervals[last].connections;
    let goodput_at = goodput_saturation(&goodput, &params);
    let (responsive_at, series) = match goodput_at {
        Some(at) => responsiveness_saturation(&report.loaded, &params, at + 1, n),
        None => (None, Stability::default()),
    };
    // The result's window: the MAD intervals ending where responsiveness
    // saturated, or the last MAD intervals.
    let end = responsive_at.unwrap_or(last);
    let first = (end + 1).saturating_sub(mad);
    summary.window = Some((first, end));
    let of = |kind| in_window(&report.loaded, params.id_s, first, end, kind).len();
    summary.samples = (
        of(ProbeKind::TcpForeign),
        of(ProbeKind::RequestForeign),
        of(ProbeKind::RequestLoaded),
    );
    let confidence = match (goodput_at, responsive_at) {
        (None, _) => {
            summary.notes.push(format!(
                "goodput did not saturate in {n} intervals of {} s: the load never filled the path, so this is not the path's responsiveness (Low confidence)",
                params.id_s
            ));
            Confidence::Low
        }
        (Some(_), Some(_)) => Confidence::High,
        (Some(_), None) => {
            let c = series.confidence(&params);
            summary.notes.push(format!(
                "responsiveness did not settle within {} % over {} intervals ({} confidence)",
                params.sdt * 100.0,
                params.mad,
                c.name()
            ));
            c
        }
    };
    summary.confidence = confidence.name().to_string();
    summary.is_final = confidence != Confidence::Low;
    if report.ending == Some(Ending::TimeUp) && responsive_at.is_none() {
        summary
            .notes
            .push("the test's time ran out before both stages saturated".into());
    }
    if let Some(means) = means_over(&report.loaded, &params, first, end) {
        summary.rpm_interval = rpm_interval(&report.loaded, &params, first, end);
        with_rpm(&mut summary, &means);
    } else {
        summary
            .notes
            .push("a probe kind has no sample in the window: no RPM".into());
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::rpm::types::Interval;

    fn interval(t_s: f64, bps: f64) -> Interval {
        Interval {
            t_s,
            goodput_down_bps: bps,
            goodput_up_bps: 0.0,
            connections: 1,
            probes: (0, 0),
        }
    }

    /// Probes every 100 ms over `intervals` seconds: handshakes and
    /// foreign requests at `foreign_ms`, self probes at `self_ms(i)`.
    fn probes(intervals: usize, foreign_ms: f64, self_ms: impl Fn(usize) -> f64) -> Vec<Sample> {
        probes_by(intervals, |_| foreign_ms, self_ms)
    }

    /// As [`probes`], the foreign probes' times by interval too.
    fn probes_by(
        intervals: usize,
        foreign_ms: impl Fn(usize) -> f64,
        self_ms: impl Fn(usize) -> f64,
    ) -> Vec<Sample> {
        (0..intervals * 10)
            .flat_map(|k| {
                let t_ms = k as f64 * 100.0;
                let i = k / 10;
                [
                    Sample {
                        kind: ProbeKind::TcpForeign,
                        t_ms,
                        ms: foreign_ms(i),
                    },
                    Sample {
                        kind: ProbeKind::RequestForeign,
                        t_ms,
                        ms: foreign_ms(i),
                    },
                    Sample {
                        kind: ProbeKind::RequestLoaded,
                        t_ms,
                        ms: self_ms(i),
                    },
                ]
            })
            .collect()
    }

    fn draft() -> Params {
        Params::default()
    }

    #[test]
    fn goodput_saturates_once_its_moving_averages_settle() {
        let p = Params::default();
        // Ramping: 10, 20, 30, 40, then flat at 50.
        let ramp = [
            10.0, 20.0, 30.0, 40.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0,
        ];
        let at = goodput_saturation(&ramp, &p).unwrap();
        // The moving averages: 10 15 20 25 35 42.5 47.5 50 50 50 50; the
        // last four within 5% of the latest first at index 9 (47.5..50).
        assert_eq!(at, 9);
        // Still climbing by half each interval: never. (A slow linear
        // climb does settle by this rule: 5% of a large value is wide.)
        let climbing: Vec<f64> = (1..30).map(|i| 1.5f64.powi(i)).collect();
        assert_eq!(goodput_saturation(&climbing, &p), None);
        // Fewer than MAD intervals can never be stable.
        assert_eq!(goodput_saturation(&[50.0, 50.0, 50.0], &p), None);
    }

    #[test]
    fn a_saturated_run_is_final_with_its_grade() {
        let report = ClientReport {
            idle: probes(1, 20.0, |_| 20.0),
            // Foreign 20 ms, self 220 ms: RPM (3000 + 272.7) / 2.
            loaded: probes(12, 20.0, |_| 220.0),
            intervals: (0..12).map(|i| interval(i as f64 + 1.0, 50e6)).collect(),
            ending: Some(Ending::Saturated),
            ..Default::default()
        };
        let s = summarise(&report, draft());
        assert_eq!(s.confidence, "High");
        assert!(s.is_final);
        let want = (3000.0 + 60_000.0 / 220.0) / 2.0;
        assert!((s.rpm.unwrap() - want).abs() < 1e-6, "{:?}", s.rpm);
        assert_eq!(s.tier.as_deref(), Some("Good"));
        // Working 60000 / 1636 = 36.7 ms, idle 20: 16.7 ms added, grade A;
        // the loaded connections alone: 200 ms added, grade D.
        assert_eq!(s.grade.as_deref(), Some("A"));
        assert_eq!(s.grade_loaded.as_deref(), Some("D"));
        assert!(s.notes.is_empty(), "{:?}", s.notes);
    }

    #[test]
    fn a_run_that_never_saturates_says_so_with_low_confidence() {
        let report = ClientReport {
            idle: probes(1, 20.0, |_| 20.0),
            loaded: probes(8, 20.0, |i| 100.0 * (i + 1) as f64),
            intervals: (0..8)
                .map(|i| interval(i as f64 + 1.0, 1e6 * 2f64.powi(i)))
                .collect(),
            ending: Some(Ending::TimeUp),
            ..Default::default()
        };
        let s = summarise(&report, draft());
        assert_eq!(s.confidence, "Low");
        assert!(!s.is_final);
        assert!(
            s.notes.iter().any(|n| n.contains("did not saturate")),
            "{:?}",
            s.notes
        );
        // The figure is still computed from the last MAD intervals.
        assert_eq!(s.window, Some((4, 7)));
    }

    #[test]
    fn the_window_is_where_responsiveness_settled() {
        // Goodput flat from the start; every probe 300 ms for 6 s, then 50
        // (a queue that drained).
        let settled = |i: usize| if i < 6 { 300.0 } else { 50.0 };
        let report = ClientReport {
            idle: probes(1, 10.0, |_| 10.0),
            loaded: probes_by(16, settled, settled),
            intervals: (0..16).map(|i| interval(i as f64 + 1.0, 50e6)).collect(),
            ending: Some(Ending::Saturated),
            ..Default::default()
        };
        let s = summarise(&report, draft());
        let (first, last) = s.window.unwrap();
        assert!(first >= 6, "{first}..{last}");
        assert_eq!(s.tm_http_l_ms, Some(50.0));
    }
}

/// The median of `samples` and its 95% distribution-free interval: the
/// order statistics at n/2 ∓ 0.98√n (the normal approximation to the
/// binomial, as in Conover's *Practical Nonparametric Statistics*, 3rd
/// ed., §3.2); with fewer than 6 samples, the range.
pub fn median_spread(samples: &[f64]) -> Option<MedianSpread> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = crate::measure::median_of_sorted(&sorted)?;
    let (low, high) = if n < 6 {
        (0, n - 1)
    } else {
        let half = 0.98 * (n as f64).sqrt();
        let low = ((n as f64 / 2.0 - half).floor() as usize).min(n - 1);
        let high = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
        (low, high)
    };
    Some(MedianSpread {
        n,
        median_ms: median,
        ci_low_ms: sorted[low],
        ci_high_ms: sorted[high],
    })
}

/// netlab's samples beside irtt's: whether their medians agree within
/// their noise (intervals that overlap, or medians within
/// [`AGREE_FLOOR_MS`]).
pub fn compared(netlab: &[f64], irtt: Vec<f64>, irtt_lost: usize) -> Compared {
    let (ours, theirs) = (median_spread(netlab), median_spread(&irtt));
    let agree = match (&ours, &theirs) {
        (Some(a), Some(b)) => {
            (a.median_ms - b.median_ms).abs() < AGREE_FLOOR_MS
                || (a.ci_low_ms <= b.ci_high_ms && b.ci_low_ms <= a.ci_high_ms)
        }
        _ => false,
    };
    Compared {
        netlab: ours.unwrap_or_default(),
        irtt: theirs.unwrap_or_default(),
        irtt_samples: irtt,
        irtt_lost,
        agree,
    }
}

/// `--irtt`'s comparison: the idle probes against irtt's idle run, and the
/// result's window's foreign probes against irtt's packets sent in the
/// same seconds (`load_started_unix_ns` places the window on irtt's clock,
/// the same host's wall clock).
pub fn side_by_side(
    report: &ClientReport,
    summary: &Summary,
    params: &Params,
    idle: &IrttRun,
    loaded: &IrttRun,
) -> SideBySide {
    let idle_ours: Vec<f64> = report
        .idle
        .iter()
        .filter(|s| s.kind == ProbeKind::RequestForeign)
        .map(|s| s.ms)
        .collect();
    let (idle_rtts, idle_lost) = idle.between(0, u64::MAX);
    let (first, end) = summary
        .window
        .unwrap_or((0, report.intervals.len().saturating_sub(1)));
    let working_ours = in_window(
        &report.loaded,
        params.id_s,
        first,
        end,
        ProbeKind::RequestForeign,
    );
    let origin = report.load_started_unix_ns;
    let at = |interval: usize| origin + (interval as f64 * params.id_s * 1e9) as u64;
    let (from, to) = (at(first), at(end + 1));
    let inside: Vec<&crate::measure::irtt::RoundTrip> = loaded
        .round_trips
        .iter()
        .filter(|t| t.sent_unix_ns >= from && t.sent_unix_ns < to)
        .collect();
    let working_rtts: Vec<f64> = inside.iter().filter_map(|t| t.rtt_ms).collect();
    let working_lost = inside.len() - working_rtts.len();
    let send_delay = median_spread(&inside.iter().filter_map(|t| t.send_ms).collect::<Vec<_>>());
    let receive_delay = median_spread(
        &inside
            .iter()
            .filter_map(|t| t.receive_ms)
            .collect::<Vec<_>>(),
    );
    let ipdv = {
        let steps: Vec<f64> = working_rtts
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .collect();
        (!steps.is_empty()).then(|| steps.iter().sum::<f64>() / steps.len() as f64)
    };
    let sent = inside.len().max(1) as f64;
    let lost = |way: &str| {
        inside
            .iter()
            .filter(|t| t.lost.as_deref() == Some(way))
            .count() as f64
    };
    let (lost_up, lost_down) = (lost("true_up"), lost("true_down"));
    SideBySide {
        idle: compared(&idle_ours, idle_rtts, idle_lost),
        working: compared(&working_ours, working_rtts, working_lost),
        send_delay_ms: send_delay.as_ref().map(|m| m.median_ms),
        receive_delay_ms: receive_delay.as_ref().map(|m| m.median_ms),
        send_delay,
        receive_delay,
        ipdv_ms: ipdv,
        upstream_loss_percent: 100.0 * lost_up / sent,
        downstream_loss_percent: 100.0 * lost_down / sent,
    }
}

#[cfg(test)]
mod side_by_side_tests {
    use super::*;

    #[test]
    fn a_medians_interval_is_its_order_statistics_and_covers_it() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let m = median_spread(&samples).unwrap();
        assert_eq!((m.n, m.median_ms), (100, 50.5));
        // 50 ∓ 0.98·10: ranks 40 and 60 (0-based), values 41 and 61.
        assert_eq!((m.ci_low_ms, m.ci_high_ms), (41.0, 61.0));
        let few = median_spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (few.median_ms, few.ci_low_ms, few.ci_high_ms),
            (2.0, 1.0, 3.0)
        );
        assert!(median_spread(&[]).is_none());
    }

    #[test]
    fn medians_agree_when_their_intervals_overlap_or_they_are_close() {
        let around =
            |centre: f64| -> Vec<f64> { (0..50).map(|k| centre + f64::from(k % 10)).collect() };
        assert!(compared(&around(70.0), around(72.0), 0).agree);
        assert!(!compared(&around(70.0), around(90.0), 0).agree);
        // Tight samples 0.3 ms apart: within the floor.
        assert!(compared(&[10.0; 20], vec![10.3; 20], 0).agree);
        assert!(!compared(&[10.0; 20], vec![11.0; 20], 0).agree);
        // Nothing from irtt: no agreement claimed.
        assert!(!compared(&[10.0; 20], Vec::new(), 5).agree);
    }
}
