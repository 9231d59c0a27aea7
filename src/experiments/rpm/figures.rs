//! rpm's RRUL-style figures: the probes' round trip and the goodput over
//! the same time axis (seconds after the load started), one series per
//! cell, so that a fix reads as one line lying lower than another while
//! carrying the same goodput.

use super::record::{Record, RpmData, RpmResult};
use crate::endpoint::rpm::types::ProbeKind;
use crate::report::figures::{Figure, Series, Style, Unit, caption};

/// The series name of each cell (`report::short_name`), repeats numbered.
fn names(records: &[&Record]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in records {
        let base = short_name(&r.data);
        let repeats = names
            .iter()
            .filter(|n| **n == base || n.starts_with(&format!("{base} #")))
            .count();
        names.push(if repeats == 0 {
            base
        } else {
            format!("{base} #{}", repeats + 1)
        });
    }
    names
}

/// A cell in a few words, for the figures' legends and the first screen:
/// its label, else its placement and the link's queue discipline, else
/// its placement and direction.
pub fn short_name(data: &RpmData) -> String {
    if let Some(label) = &data.params.label {
        return label.clone();
    }
    let discipline = data
        .result
        .as_ref()
        .and_then(|r| r.link.as_ref())
        .and_then(|l| l.profile.impair.queue_discipline.as_ref())
        .map(|q| q.name());
    match discipline {
        Some(q) => format!("{} {q}", data.params.placement.name()),
        None => format!(
            "{} {}",
            data.params.placement.name(),
            data.params.direction.name()
        ),
    }
}

fn result_of(r: &Record) -> &RpmResult {
    let RpmData { result, .. } = &r.data;
    result.as_deref().expect("filtered on a result")
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// The median request round trip (foreign and self probes' 1-byte
/// exchanges; handshakes apart) in each interval, at the interval's end,
/// with the idle median at time 0.
pub fn latency_points(result: &RpmResult) -> Vec<(f64, f64)> {
    let requests =
        |kind: ProbeKind| matches!(kind, ProbeKind::RequestForeign | ProbeKind::RequestLoaded);
    let mut points = Vec::new();
    let mut idle: Vec<f64> = result
        .client
        .idle
        .iter()
        .filter(|s| requests(s.kind))
        .map(|s| s.ms)
        .collect();
    if let Some(m) = median(&mut idle) {
        points.push((0.0, m));
    }
    let mut start = 0.0;
    for interval in &result.client.intervals {
        let end = interval.t_s * 1e3;
        let mut inside: Vec<f64> = result
            .client
            .loaded
            .iter()
            .filter(|s| requests(s.kind) && s.t_ms >= start && s.t_ms < end)
            .map(|s| s.ms)
            .collect();
        if let Some(m) = median(&mut inside) {
            points.push((interval.t_s, m));
        }
        start = end;
    }
    points
}

/// Goodput (down plus up) in each interval, bit/s, at the interval's end.
pub fn goodput_points(result: &RpmResult) -> Vec<(f64, f64)> {
    let mut points = vec![(0.0, 0.0)];
    points.extend(
        result
            .client
            .intervals
            .iter()
            .map(|i| (i.t_s, i.goodput_down_bps + i.goodput_up_bps)),
    );
    points
}

/// The two figures, latency above goodput, both against seconds after the
/// load started (none without a measured cell).
pub fn rpm_figures(records: &[Record]) -> Vec<Figure> {
    let measured: Vec<&Record> = records
        .iter()
        .filter(|r| {
            r.data
                .result
                .as_ref()
                .is_some_and(|res| !res.client.intervals.is_empty())
        })
        .collect();
    if measured.is_empty() {
        return Vec::new();
    }
    let names = names(&measured);
    let series = |points: &dyn Fn(&RpmResult) -> Vec<(f64, f64)>| -> Vec<Series> {
        measured
            .iter()
            .zip(&names)
            .map(|(r, name)| Series {
                name: name.clone(),
                style: Style::Measured,
                points: points(result_of(r)),
            })
            .collect()
    };
    let figure = |id: &str, title: &str, y_label: &str, log_y, y_unit, series| Figure {
        log_y,
        y_unit,
        ..Figure::plain(
            id,
            title,
            ("seconds after the load started (0: idle)", y_label),
            series,
            caption(&measured),
        )
    };
    vec![
        figure(
            "rpm-latency-over-time",
            "Round trip under load, per fix (RRUL-style, above goodput)",
            "median 1-byte request round trip per interval",
            true,
            Unit::Seconds { scale: 1e-3 },
            series(&|r| latency_points(r)),
        ),
        figure(
            "rpm-goodput-over-time",
            "Goodput under load, per fix (same time axis as the round trip above)",
            "goodput, down + up",
            false,
            Unit::Si {
                scale: 1.0,
                symbol: "bit/s".into(),
            },
            series(&|r| goodput_points(r)),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::responsiveness::Params;
    use crate::endpoint::rpm::types::{ClientReport, Interval, Sample};

    fn sample(kind: ProbeKind, t_ms: f64, ms: f64) -> Sample {
        Sample { kind, t_ms, ms }
    }

    fn interval(t_s: f64, down: f64) -> Interval {
        Interval {
            t_s,
            goodput_down_bps: down,
            goodput_up_bps: 1e6,
            connections: 1,
            probes: (0, 0),
        }
    }

    fn result() -> RpmResult {
        RpmResult {
            draft: Params::default(),
            client: ClientReport {
                idle: vec![
                    sample(ProbeKind::TcpForeign, -900.0, 99.0),
                    sample(ProbeKind::RequestForeign, -800.0, 10.0),
                    sample(ProbeKind::RequestForeign, -700.0, 12.0),
                    sample(ProbeKind::RequestForeign, -600.0, 11.0),
                ],
                loaded: vec![
                    sample(ProbeKind::RequestLoaded, 100.0, 40.0),
                    sample(ProbeKind::RequestForeign, 200.0, 20.0),
                    sample(ProbeKind::TcpForeign, 300.0, 500.0),
                    sample(ProbeKind::RequestLoaded, 1500.0, 90.0),
                ],
                intervals: vec![
                    interval(1.0, 40e6),
                    interval(2.0, 48e6),
                    interval(3.0, 48e6),
                ],
                ..Default::default()
            },
            server: Default::default(),
            link: None,
            emulator: None,
            summary: Default::default(),
            split: None,
            irtt: None,
        }
    }

    #[test]
    fn latency_is_each_intervals_median_request_with_the_idle_one_at_zero() {
        // Handshakes are not requests: the 99 ms and 500 ms ones are left
        // out. The third interval had no probe, so no point.
        assert_eq!(
            latency_points(&result()),
            vec![(0.0, 11.0), (1.0, 30.0), (2.0, 90.0)]
        );
    }

    #[test]
    fn goodput_is_down_plus_up_per_interval_from_zero() {
        assert_eq!(
            goodput_points(&result()),
            vec![(0.0, 0.0), (1.0, 41e6), (2.0, 49e6), (3.0, 49e6)]
        );
    }
}
