//! Pure functions over login-load records: whether the load generator
//! rather than the server set a cell's pace, and each server's limit (the
//! most users it serves with a normal verdict) as a search's probes show it.

use crate::experiments::login::record::LoginData;
use crate::experiments::login::record::Record;
use crate::experiments::login::record::{Limit, LoginResult};

/// The load generator is the bottleneck rather than the server: it used
/// most of a core, or sent keystrokes late.
pub fn generator_limited(result: &LoginResult) -> Option<String> {
    let t = &result.typist;
    if t.own_cpu_pct() > 80.0 {
        Some(format!(
            "the load generator used {:.0}% of a core",
            t.own_cpu_pct()
        ))
    } else if t.send_lag_p99_ms > 20.0 {
        Some(format!(
            "the load generator sent keystrokes late (p99 {:.1} ms)",
            t.send_lag_p99_ms
        ))
    } else {
        None
    }
}

/// One probe's outcome: normal, not (and why), or paced by the generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Normal,
    Worse(String),
    GeneratorLimited(String),
}

/// What a login record says about its server at its user count.
pub fn probe(record: &Record) -> Option<Probe> {
    let LoginData { result, .. } = &record.data;
    Some(match result.as_deref() {
        Some(r) => match generator_limited(r) {
            Some(why) => Probe::GeneratorLimited(why),
            None if r.verdict == "normal" => Probe::Normal,
            None if r.criterion.is_empty() => Probe::Worse(format!(
                "{} (echo p99 {:.1} ms)",
                r.verdict, r.typist.echo_p99_ms
            )),
            None => Probe::Worse(format!("{}: {}", r.verdict, r.criterion)),
        },
        None => Probe::Worse(format!(
            "failed: {}",
            record.error.as_deref().unwrap_or("no result")
        )),
    })
}

/// Why a limit is only a lower bound: the generator could not drive `at`
/// users (the search and the records' reading of it say it alike).
pub fn lower_bound_why(at: usize, why: &str, sustains: usize) -> String {
    format!(
        "stopped at {at} users: {why}; the machine is saturated, so {sustains} is a lower bound for the server"
    )
}

/// Each server's limit from the login records of one budget (`budget_pct`,
/// None for unbudgeted cells), per server, protocol and placement in the
/// order they first appear: the most users served normally below the
/// fewest that were not. A count the generator could not drive ends what
/// the records can say: the limit found below it is a lower bound.
pub fn limits(records: &[Record], budget_pct: Option<f64>) -> Vec<Limit> {
    let mut groups: Vec<(Limit, Vec<(usize, Probe)>)> = Vec::new();
    for record in records {
        let LoginData { params, .. } = &record.data;
        if params.host_cpu_pct != budget_pct {
            continue;
        }
        let Some(outcome) = probe(record) else {
            continue;
        };
        let placement = params.placement.name().to_string();
        let probes = match groups.iter().position(|(l, _)| {
            l.relay == params.relay && l.protocol == params.protocol && l.placement == placement
        }) {
            Some(i) => &mut groups[i].1,
            None => {
                let limit = Limit {
                    relay: params.relay,
                    protocol: params.protocol,
                    placement,
                    sustains: 0,
                    degraded_at: None,
                    why: String::new(),
                };
                groups.push((limit, Vec::new()));
                &mut groups.last_mut().expect("just pushed").1
            }
        };
        probes.push((params.users, outcome));
    }
    groups
        .into_iter()
        .map(|(limit, probes)| limit_of(limit, &probes))
        .collect()
}

/// One server's limit from its probes.
fn limit_of(mut limit: Limit, probes: &[(usize, Probe)]) -> Limit {
    let first = |wanted: fn(&Probe) -> Option<&String>| {
        probes
            .iter()
            .filter_map(|(users, p)| wanted(p).map(|why| (*users, why)))
            .min_by_key(|(users, _)| *users)
    };
    let worse = first(|p| match p {
        Probe::Worse(why) => Some(why),
        _ => None,
    });
    let stopped = first(|p| match p {
        Probe::GeneratorLimited(why) => Some(why),
        _ => None,
    });
    // Normal counts above a worse one are noise at the edge, not capacity.
    let ceiling = [worse.map(|w| w.0), stopped.map(|s| s.0)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(usize::MAX);
    limit.sustains = probes
        .iter()
        .filter(|(users, p)| *p == Probe::Normal && *users < ceiling)
        .map(|(users, _)| *users)
        .max()
        .unwrap_or(0);
    limit.degraded_at = worse.map(|w| w.0);
    limit.why = match (worse, stopped) {
        (_, Some((at, why))) if worse.is_none_or(|w| at < w.0) => {
            lower_bound_why(at, why, limit.sustains)
        }
        (Some((at, why)), _) => format!("degraded at {at}: {why}"),
        _ => format!("normal at every count tried (up to {})", limit.sustains),
    };
    limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::login::host::Dialect;
    use crate::endpoint::login::host::Target;
    use crate::endpoint::login::typist::TypistReport;
    use crate::experiments::login::record::LoginParams;

    fn record(relay: Target, users: usize, budget: Option<f64>, p99: f64, lag: f64) -> Record {
        let params = LoginParams {
            relay,
            protocol: Dialect::Rlogin,
            users,
            host_cpu_pct: budget,
            ..Default::default()
        };
        let verdict = if p99 <= 100.0 { "normal" } else { "unusable" };
        let result = LoginResult {
            params: params.clone(),
            verdict: verdict.into(),
            typist: TypistReport {
                echo_p99_ms: p99,
                send_lag_p99_ms: lag,
                ..Default::default()
            },
            ..Default::default()
        };
        Record::new(
            String::new(),
            "loopback",
            &Default::default(),
            LoginData {
                params,
                result: Some(Box::new(result)),
            },
            None,
        )
    }

    #[test]
    fn a_limit_is_the_most_users_served_normally_below_the_first_worse_count() {
        let budget = Some(3.0);
        let records = vec![
            record(Target::Fork, 16, budget, 1.0, 0.0),
            record(Target::Fork, 32, budget, 1.0, 0.0),
            record(Target::Fork, 64, budget, 1.0, 0.0),
            record(Target::Fork, 128, budget, 700.0, 0.0),
            // A lucky probe above the edge does not raise the limit.
            record(Target::Fork, 96, budget, 90.0, 0.0),
            record(Target::Fork, 80, budget, 800.0, 0.0),
            record(Target::Epoll, 16, budget, 1.0, 0.0),
            record(Target::Epoll, 32, budget, 1.0, 0.0),
            // Unbudgeted cells are another experiment.
            record(Target::Fork, 48, None, 900.0, 0.0),
        ];
        let limits = limits(&records, budget);
        assert_eq!(limits.len(), 2);
        assert_eq!((limits[0].relay, limits[0].sustains), (Target::Fork, 64));
        assert_eq!(limits[0].degraded_at, Some(80));
        assert!(
            limits[0]
                .why
                .starts_with("degraded at 80: unusable (echo p99 800.0 ms)")
        );
        assert_eq!((limits[1].relay, limits[1].sustains), (Target::Epoll, 32));
        assert_eq!(limits[1].degraded_at, None);
        assert!(limits[1].why.starts_with("normal at every count tried"));
        let free = super::limits(&records, None);
        assert_eq!((free[0].sustains, free[0].degraded_at), (0, Some(48)));
    }

    #[test]
    fn a_count_the_generator_could_not_drive_makes_the_limit_a_lower_bound() {
        let records = vec![
            record(Target::Epoll, 1000, None, 1.0, 0.0),
            record(Target::Epoll, 2000, None, 1.0, 50.0),
        ];
        let limits = limits(&records, None);
        assert_eq!(limits[0].sustains, 1000);
        assert!(limits[0].why.contains("lower bound"), "{}", limits[0].why);
    }
}
