//! Pure functions over login-load records: whether the load generator
//! rather than the server set a cell's pace, and each server's limit (the
//! most users it serves with a normal verdict) as a search's probes show it.

use crate::record::login::{Limit, LoginResult};
use crate::record::{Record, RecordData};

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
enum Probe {
    Normal,
    Worse(String),
    GeneratorLimited(String),
}

fn probe(record: &Record, result: Option<&LoginResult>) -> Probe {
    match result {
        Some(r) => match generator_limited(r) {
            Some(why) => Probe::GeneratorLimited(why),
            None if r.verdict == "normal" => Probe::Normal,
            None => Probe::Worse(format!(
                "{} (echo p99 {:.1} ms)",
                r.verdict, r.typist.echo_p99_ms
            )),
        },
        None => Probe::Worse(format!(
            "failed: {}",
            record.error.as_deref().unwrap_or("no result")
        )),
    }
}

/// Each server's limit from the login records of one budget (`budget_pct`,
/// None for unbudgeted cells), per server, protocol and placement in the
/// order they first appear: the most users served normally below the
/// fewest that were not. A count the generator could not drive ends what
/// the records can say: the limit found below it is a lower bound.
pub fn limits(records: &[Record], budget_pct: Option<f64>) -> Vec<Limit> {
    let mut limits: Vec<(Limit, Option<(usize, String)>)> = Vec::new();
    for record in records {
        let RecordData::Login { params, result } = &record.data else {
            continue;
        };
        if params.host_cpu_pct != budget_pct {
            continue;
        }
        let placement = params.placement.name().to_string();
        let index = match limits.iter().position(|(l, _)| {
            l.relay == params.relay && l.protocol == params.protocol && l.placement == placement
        }) {
            Some(i) => i,
            None => {
                limits.push((
                    Limit {
                        relay: params.relay,
                        protocol: params.protocol,
                        placement,
                        sustains: 0,
                        degraded_at: None,
                        why: String::new(),
                    },
                    None,
                ));
                limits.len() - 1
            }
        };
        let (limit, stopped) = &mut limits[index];
        let users = params.users;
        match probe(record, result.as_deref()) {
            Probe::Normal => limit.sustains = limit.sustains.max(users),
            Probe::Worse(why) => {
                if limit.degraded_at.is_none_or(|d| users < d) {
                    limit.degraded_at = Some(users);
                    limit.why = format!("degraded at {users}: {why}");
                }
            }
            Probe::GeneratorLimited(why) => {
                if stopped.as_ref().is_none_or(|(at, _)| users < *at) {
                    *stopped = Some((users, why));
                }
            }
        }
    }
    limits
        .into_iter()
        .map(|(mut limit, stopped)| {
            // Normal counts above a worse one are noise at the edge, not capacity.
            let ceiling = [limit.degraded_at, stopped.as_ref().map(|s| s.0)]
                .into_iter()
                .flatten()
                .min();
            if let Some(ceiling) = ceiling {
                let normal_below = records.iter().filter_map(|r| match &r.data {
                    RecordData::Login { params, result }
                        if params.host_cpu_pct == budget_pct
                            && params.relay == limit.relay
                            && params.protocol == limit.protocol
                            && params.placement.name() == limit.placement
                            && params.users < ceiling
                            && matches!(probe(r, result.as_deref()), Probe::Normal) =>
                    {
                        Some(params.users)
                    }
                    _ => None,
                });
                limit.sustains = normal_below.max().unwrap_or(0);
            }
            match stopped {
                Some((at, why)) if limit.degraded_at.is_none_or(|d| at < d) => {
                    limit.why = format!(
                        "stopped at {at} users: {why}; the machine is saturated, so {} is a lower bound for the server",
                        limit.sustains
                    );
                }
                _ if limit.degraded_at.is_none() => {
                    limit.why = format!("normal at every count tried (up to {})", limit.sustains);
                }
                _ => {}
            }
            limit
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::login::{Dialect, LoginParams, Target, TypistReport};

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
            RecordData::Login {
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
