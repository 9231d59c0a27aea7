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

/// One probe's outcome: normal, not (and why), paced by the generator,
/// or disturbed by the machine under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Normal,
    Worse(String),
    GeneratorLimited(String),
    /// The server did worse than normal while the hypervisor took so much
    /// of the machine over the window (steal time) that the verdict says
    /// more about the host's neighbours than about the server: half the
    /// server's budget or more ([`disturbed`]); or while other work left
    /// the machine no CPU to spare ([`contended`]). A normal verdict under
    /// either stands: the disturbance can only have made it harder.
    Disturbed(String),
}

/// Whether a budgeted probe's window was disturbed: the CPU time the
/// hypervisor took from this machine (`/proc/stat` steal, in percent of
/// one CPU) was half the server's budget or more. A budget stands for the
/// whole CPU of a 1989 host, so steal of that size is the emulated host
/// losing half its CPU to someone else. On 2026-12-02 the probes judged
/// degraded below a search's own earlier normal counts had 1-6% of the
/// machine stolen, the normal ones mostly under 0.5%.
pub fn disturbed(result: &LoginResult, cores: usize) -> Option<String> {
    let budget = result.params.host_cpu_pct?;
    let stolen = result.cpu.steal_pct * cores.max(1) as f64;
    (stolen >= budget / 2.0).then(|| {
        format!(
            "the hypervisor took {stolen:.1}% of a CPU (steal) over the window, half the {budget}% budget or more"
        )
    })
}

/// Other work held at least this much of a CPU before the cell began
/// (`baseline_busy_cpus`): a job beside the experiment, not the idle
/// host's housekeeping (hundredths of a CPU here).
pub const BUSY_BESIDE_CPUS: f64 = 0.5;

/// A window with less idle than this, in percent of all CPUs' time, had
/// no CPU to spare: a task that became runnable waited for one.
pub const SATURATED_IDLE_PCT: f64 = 5.0;

/// Whether a cell's window was contended by work that was not the cell's:
/// other work held [`BUSY_BESIDE_CPUS`] or more before the cell, and the
/// machine had no CPU to spare during it ([`SATURATED_IDLE_PCT`]). Then
/// the servers, the typists and the wire emulator (a process like any
/// other) waited for a CPU, and the echo times measure that wait as well
/// as the design. One job beside a budgeted search is not this: the
/// budget is a share of one CPU and the machine had the other to spare.
/// Seen on 2026-12-03 beside `yes` and a build: fq_codel's cell echoed at
/// p99 1.8 s, slower than drop-tail's, with no idle left.
pub fn contended(result: &LoginResult) -> Option<String> {
    (result.baseline_busy_cpus >= BUSY_BESIDE_CPUS && result.cpu.idle_pct < SATURATED_IDLE_PCT)
        .then(|| {
            format!(
                "other work held {:.1} CPUs before the cell and the machine had {:.1}% idle during it: the servers, typists and emulator waited for a CPU",
                result.baseline_busy_cpus, result.cpu.idle_pct
            )
        })
}

/// What a login record says about its server at its user count.
pub fn probe(record: &Record) -> Option<Probe> {
    let LoginData { result, .. } = &record.data;
    Some(match result.as_deref() {
        Some(r) => match generator_limited(r) {
            Some(why) => Probe::GeneratorLimited(why),
            // Steal can only make a server look worse: one that held
            // through it held, so only a worse verdict is set aside.
            None if r.verdict == "normal" => Probe::Normal,
            None if let Some(why) = disturbed(r, record.host.cores).or_else(|| contended(r)) => {
                Probe::Disturbed(why)
            }
            None if r.criterion.is_empty() => Probe::Worse(format!(
                "{}: echo p99 {:.1} ms",
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

/// One user count's probes: how many were normal, how many not, and why
/// the last that was not. A search repeats the counts on either side of
/// the boundary it found, so a count's verdict is its probes' majority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub users: usize,
    pub normal: u32,
    pub worse: u32,
    /// The verdict word and its criterion of the latest probe that was not
    /// normal ("unusable: echo p99 1234.5 ms, past 1 s").
    pub why: Option<String>,
}

impl Tally {
    /// Whether most probes were normal (a tie is not).
    pub fn is_normal(&self) -> bool {
        self.normal > self.worse
    }

    /// Whether the majority has at least two probes behind it: the count
    /// was repeated and the repetition agreed, or a third probe decided.
    pub fn is_confirmed(&self) -> bool {
        self.normal.max(self.worse) >= 2 && self.normal != self.worse
    }

    /// The majority's share, in words: "2 of 2 probes".
    pub fn agreement(&self) -> String {
        let total = self.normal + self.worse;
        let side = if self.is_normal() {
            self.normal
        } else {
            self.worse
        };
        format!(
            "{side} of {total} probe{}",
            if total == 1 { "" } else { "s" }
        )
    }
}

/// The probes' tallies by user count, fewest users first (counts the
/// generator could not drive are left out: they say nothing of the server).
pub fn tallies(probes: &[(usize, Probe)]) -> Vec<Tally> {
    let mut tallies: Vec<Tally> = Vec::new();
    for (users, probe) in probes {
        if matches!(probe, Probe::GeneratorLimited(_) | Probe::Disturbed(_)) {
            continue;
        }
        let at = match tallies.iter().position(|t| t.users == *users) {
            Some(i) => i,
            None => {
                tallies.push(Tally {
                    users: *users,
                    normal: 0,
                    worse: 0,
                    why: None,
                });
                tallies.len() - 1
            }
        };
        match probe {
            Probe::Normal => tallies[at].normal += 1,
            Probe::Worse(why) => {
                tallies[at].worse += 1;
                tallies[at].why = Some(why.clone());
            }
            Probe::GeneratorLimited(_) | Probe::Disturbed(_) => {}
        }
    }
    tallies.sort_by_key(|t| t.users);
    tallies
}

/// The boundary the tallies show: the fewest users whose majority was not
/// normal, and the most below it whose majority was (None: nothing
/// normal below it). Normal counts above a worse one are noise at the
/// edge, not capacity.
pub fn boundary(tallies: &[Tally]) -> (Option<&Tally>, Option<&Tally>) {
    let bad = tallies.iter().find(|t| !t.is_normal());
    let good = tallies
        .iter()
        .filter(|t| t.is_normal() && bad.is_none_or(|b| t.users < b.users))
        .max_by_key(|t| t.users);
    (good, bad)
}

/// The count held normally with the most users below the first that was
/// not, and below `top` (a count the search could not judge;
/// [`usize::MAX`]: none): what a search sustains, and what the records'
/// reading of it says.
pub fn held_below(tallies: &[Tally], top: usize) -> Option<&Tally> {
    let (_, bad) = boundary(tallies);
    let top = bad.map_or(top, |b| b.users.min(top));
    tallies
        .iter()
        .filter(|t| t.is_normal() && t.users < top)
        .max_by_key(|t| t.users)
}

/// Why a search stopped at `bad`, one verdict word with its criterion:
/// "104 users unusable in 2 of 2 probes: echo p99 1234.5 ms, past 1 s".
pub fn not_normal_why(bad: &Tally) -> String {
    let why = bad.why.as_deref().unwrap_or("not normal");
    let (word, criterion) = why.split_once(": ").unwrap_or((why, ""));
    let criterion = if criterion.is_empty() {
        String::new()
    } else {
        format!(": {criterion}")
    };
    format!(
        "{} users {word} in {}{criterion}",
        bad.users,
        bad.agreement()
    )
}

/// Probes of one count a search may repeat while the machine under it is
/// disturbed: past these, the count cannot be judged and the search stops.
pub const DISTURBED_PROBES: usize = 3;

/// Counts whose last [`DISTURBED_PROBES`] probes were all disturbed: where
/// a search stopped (it repeats a disturbed count at once, so these are
/// its last probes), and why.
fn undecidable(probes: &[(usize, Probe)]) -> Vec<(usize, String)> {
    let mut counts: Vec<(usize, String)> = Vec::new();
    for (users, _) in probes {
        let of: Vec<&Probe> = probes
            .iter()
            .filter(|(u, _)| u == users)
            .map(|(_, p)| p)
            .collect();
        if of.len() >= DISTURBED_PROBES
            && of[of.len() - DISTURBED_PROBES..]
                .iter()
                .all(|p| matches!(p, Probe::Disturbed(_)))
            && !counts.iter().any(|(u, _)| u == users)
            && let Some(Probe::Disturbed(why)) = of.last()
        {
            counts.push((*users, disturbed_why(why)));
        }
    }
    counts
}

/// What disturbed a count's probes, all of them.
pub fn disturbed_why(why: &str) -> String {
    format!("the machine was disturbed in {DISTURBED_PROBES} probes in a row ({why})")
}

/// Why a search stopped at `at`, a count it could not judge: the limit
/// found below it is what held before, a lower bound.
pub fn disturbed_stop_why(at: usize, why: &str, sustains: usize) -> String {
    format!("stopped at {at} users, not judged: {why}; {sustains} held before, a lower bound")
}

/// One server's limit from its probes.
fn limit_of(mut limit: Limit, probes: &[(usize, Probe)]) -> Limit {
    let tallies = tallies(probes);
    let (_, worse) = boundary(&tallies);
    let stopped = probes
        .iter()
        .filter_map(|(users, p)| match p {
            Probe::GeneratorLimited(why) => Some((*users, why.clone(), false)),
            _ => None,
        })
        .chain(
            undecidable(probes)
                .into_iter()
                .map(|(users, why)| (users, why, true)),
        )
        .min_by_key(|(users, _, _)| *users);
    // Below a count that stopped the search: the most normal count under it.
    limit.sustains =
        held_below(&tallies, stopped.as_ref().map_or(usize::MAX, |s| s.0)).map_or(0, |t| t.users);
    limit.degraded_at = worse.map(|w| w.users);
    limit.why = match (worse, stopped) {
        (_, Some((at, why, true))) if worse.is_none_or(|w| at < w.users) => {
            disturbed_stop_why(at, &why, limit.sustains)
        }
        (_, Some((at, why, false))) if worse.is_none_or(|w| at < w.users) => {
            lower_bound_why(at, &why, limit.sustains)
        }
        (Some(bad), _) => not_normal_why(bad),
        _ => format!("normal at every count tried, up to {}", limit.sustains),
    };
    limit
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::endpoint::login::host::Dialect;
    use crate::endpoint::login::host::Target;
    use crate::endpoint::login::typist::TypistReport;
    use crate::experiments::login::record::LoginParams;

    pub(crate) fn record(
        relay: Target,
        users: usize,
        budget: Option<f64>,
        p99: f64,
        lag: f64,
    ) -> Record {
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
        assert_eq!(
            limits[0].why,
            "80 users unusable in 1 of 1 probe: echo p99 800.0 ms"
        );
        assert_eq!((limits[1].relay, limits[1].sustains), (Target::Epoll, 32));
        assert_eq!(limits[1].degraded_at, None);
        assert!(limits[1].why.starts_with("normal at every count tried"));
        let free = super::limits(&records, None);
        assert_eq!((free[0].sustains, free[0].degraded_at), (0, Some(48)));
    }

    #[test]
    fn a_worse_cell_on_a_machine_other_work_saturated_is_set_aside_as_disturbed() {
        let cell = |beside: f64, idle: f64| {
            let mut r = record(Target::Epoll, 8, None, 1800.0, 0.0);
            let result = r.data.result.as_mut().unwrap();
            result.baseline_busy_cpus = beside;
            result.cpu.idle_pct = idle;
            probe(&r).unwrap()
        };
        // A job and a build beside it, no idle left: the wait is theirs.
        let Probe::Disturbed(why) = cell(1.4, 0.8) else {
            panic!("{:?}", cell(1.4, 0.8))
        };
        assert!(
            why.contains("1.4 CPUs") && why.contains("0.8% idle"),
            "{why}"
        );
        // The cell's own work filling the machine is the design's cost.
        assert!(matches!(cell(0.05, 0.0), Probe::Worse(_)));
        // A job beside it that left the machine CPU to spare changed
        // nothing the verdict rests on.
        assert!(matches!(cell(1.0, 40.0), Probe::Worse(_)));
        // A normal verdict under contention stands.
        let mut r = record(Target::Epoll, 8, None, 10.0, 0.0);
        r.data.result.as_mut().unwrap().baseline_busy_cpus = 1.4;
        assert_eq!(probe(&r), Some(Probe::Normal));
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

    #[test]
    fn a_repeated_count_is_judged_by_its_probes_majority() {
        let records = vec![
            record(Target::Fork, 64, None, 1.0, 0.0),
            record(Target::Fork, 128, None, 900.0, 0.0),
            record(Target::Fork, 96, None, 1.0, 0.0),
            record(Target::Fork, 112, None, 900.0, 0.0),
            // The confirmation: 96 failed once, then held; 112 failed again.
            record(Target::Fork, 96, None, 300.0, 0.0),
            record(Target::Fork, 112, None, 900.0, 0.0),
            record(Target::Fork, 96, None, 1.0, 0.0),
        ];
        let found = limits(&records, None);
        assert_eq!((found[0].sustains, found[0].degraded_at), (96, Some(112)));
        assert_eq!(
            found[0].why,
            "112 users unusable in 2 of 2 probes: echo p99 900.0 ms"
        );
        // Had 96 failed twice in three, it would be the boundary.
        let mut flipped = records.clone();
        flipped.pop();
        flipped.push(record(Target::Fork, 96, None, 300.0, 0.0));
        let found = limits(&flipped, None);
        assert_eq!((found[0].sustains, found[0].degraded_at), (64, Some(96)));
        // One verdict word in the reason.
        assert!(
            found[0]
                .why
                .starts_with("96 users unusable in 2 of 3 probes: "),
            "{}",
            found[0].why
        );
    }
}
