//! The draft's saturation rules (draft-ietf-ippm-responsiveness-06,
//! section 4.4), as the measuring end applies them live and rpm's
//! analysis applies them again to a record: goodput saturates once the
//! moving averages of the last MAD intervals are stable within SDT, and
//! responsiveness once the moving window's RPM is, after goodput did.

use super::types::{ProbeKind, Sample};
use crate::analysis::responsiveness::{Params, ProbeMeans, Rpm, Stability};

/// The probes of intervals `first..=last` (by start time), by kind.
pub fn in_window(
    samples: &[Sample],
    id_s: f64,
    first: usize,
    last: usize,
    kind: ProbeKind,
) -> Vec<f64> {
    let (from, to) = (
        first as f64 * id_s * 1000.0,
        (last + 1) as f64 * id_s * 1000.0,
    );
    samples
        .iter()
        .filter(|s| s.kind == kind && s.t_ms >= from && s.t_ms < to)
        .map(|s| s.ms)
        .collect()
}

/// The trimmed means of the probes that started in intervals
/// `first..=last`.
pub fn means_over(
    samples: &[Sample],
    params: &Params,
    first: usize,
    last: usize,
) -> Option<ProbeMeans> {
    let of = |kind| in_window(samples, params.id_s, first, last, kind);
    ProbeMeans::of(
        &of(ProbeKind::TcpForeign),
        &of(ProbeKind::RequestForeign),
        &of(ProbeKind::RequestLoaded),
        params.tmp,
    )
}

/// The responsiveness at the end of interval `i`: over the probes of the
/// last MAD intervals (the draft's moving window).
pub fn responsiveness_at(samples: &[Sample], params: &Params, i: usize) -> Option<Rpm> {
    let first = (i + 1).saturating_sub(params.mad.max(1));
    means_over(samples, params, first, i).map(|m| m.rpm())
}

/// The draft's saturation rule over the goodput of each interval (bit/s):
/// the moving averages of the last MAD intervals, stable once their
/// standard deviation is within SDT of the latest. The first interval
/// where that held.
pub fn goodput_saturation(goodput: &[f64], params: &Params) -> Option<usize> {
    let mut averages = Stability::default();
    for i in 0..goodput.len() {
        let window = &goodput[(i + 1).saturating_sub(params.mad.max(1))..=i];
        averages.push(window.iter().sum::<f64>() / window.len() as f64);
        if averages.stable(params) {
            return Some(i);
        }
    }
    None
}

/// After goodput saturated at `from`: the first interval where the
/// responsiveness of each interval since was stable by the same rule.
pub fn responsiveness_saturation(
    samples: &[Sample],
    params: &Params,
    from: usize,
    intervals: usize,
) -> (Option<usize>, Stability) {
    let mut series = Stability::default();
    for i in from..intervals {
        if let Some(rpm) = responsiveness_at(samples, params, i) {
            series.push(rpm.combined);
            if series.stable(params) {
                return (Some(i), series);
            }
        }
    }
    (None, series)
}
