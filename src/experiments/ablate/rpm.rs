//! `netlab ablate rpm`: responsiveness's fixes as a full factorial, each
//! measured on the same path (draft-ietf-ippm-responsiveness's advice to
//! endpoints and the bottleneck's queue): TCP_NOTSENT_LOWAT, smaller send
//! and receive buffers, the congestion control, and the bottleneck
//! queue's discipline on a netns link. Every combination runs `reps`
//! times, each repetition a block of every combination in a seeded random
//! order of its own, as `ablate stream` does; each run is an rpm record
//! with its levels, and the effects on RPM come from
//! `analysis::factorial`.

use super::cell::{AblateError, blocks, check_budget, fresh_seed, named, parse_factor};
use crate::analysis::factorial::{Analysis, Factor, FactorialError, analyse, combinations};
use crate::analysis::responsiveness::Grade;
use crate::experiments::rpm::cell::RpmMeasure;
use crate::experiments::rpm::options::RpmArgs;
use crate::experiments::rpm::record::{Record, RpmData, RpmDesign, RpmParams};
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::record::testbed::{LinkVia, Placement};
use crate::report::table::{markdown, num};
use crate::testbed::link::{QueueSize, parse_queue_size, queue_discipline};
use crate::units::parse_size;
use anyhow::Context;
use clap::Args;

/// What an rpm factor changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpmKnob {
    NotsentLowat,
    Sndbuf,
    Rcvbuf,
    Cc,
    Discipline,
}

/// Every factor `ablate rpm --factor` takes.
pub const RPM_KNOBS: [(&str, RpmKnob, &str); 5] = [
    (
        "notsent-lowat",
        RpmKnob::NotsentLowat,
        "off or sizes (TCP_NOTSENT_LOWAT on the senders), e.g. off,16K",
    ),
    ("sndbuf", RpmKnob::Sndbuf, "default or sizes"),
    ("rcvbuf", RpmKnob::Rcvbuf, "default or sizes"),
    (
        "cc",
        RpmKnob::Cc,
        "congestion control names, e.g. cubic,bbr",
    ),
    (
        "discipline",
        RpmKnob::Discipline,
        "droptail, codel, fq_codel (the bottleneck's queue; netns with a rate)",
    ),
];

#[derive(Debug, Args)]
pub struct AblateRpmArgs {
    /// A factor and its levels, the first the baseline (repeatable):
    /// notsent-lowat, sndbuf, rcvbuf, cc; on --placement netns with a
    /// rate also discipline.
    #[arg(long = "factor", value_name = "NAME=V1,V2", required = true)]
    pub factors: Vec<String>,
    /// Runs of each combination, each in its own randomised block.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Refuse a design whose runs would take longer than this.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration, value_name = "TIME")]
    pub budget: std::time::Duration,
    /// Seed of the random order (default: a fresh one, recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub rpm: RpmArgs,
}

/// One factor of the design.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmFactor {
    pub knob: RpmKnob,
    pub factor: Factor,
}

impl RpmFactor {
    /// `NAME=V1,V2[,...]`, each level checked against what the factor takes.
    pub fn parse(text: &str) -> Result<RpmFactor, AblateError> {
        let (knob, takes, factor) =
            parse_factor(text, &RPM_KNOBS, |name, levels| AblateError::Refused {
                name: name.into(),
                level: levels.into(),
                reason: format!(
                    "not a factor of rpm (known: {})",
                    RPM_KNOBS.map(|k| k.0).join(", ")
                ),
            })?;
        for level in &factor.levels {
            let fine = match knob {
                RpmKnob::NotsentLowat => level == "off" || size(level).is_ok(),
                RpmKnob::Sndbuf | RpmKnob::Rcvbuf => level == "default" || size(level).is_ok(),
                RpmKnob::Cc => {
                    !level.is_empty()
                        && level
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                }
                RpmKnob::Discipline => ["droptail", "codel", "fq_codel"].contains(&level.as_str()),
            };
            if !fine {
                return Err(AblateError::Level {
                    name: factor.name.clone(),
                    level: level.clone(),
                    takes,
                });
            }
        }
        Ok(RpmFactor { knob, factor })
    }
}

/// A size level as a socket option takes it (1 byte to 2 GiB).
fn size(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text).map_err(|e| e.to_string())?;
    if bytes == 0 || bytes > i32::MAX as u64 {
        return Err(format!("{text}: from 1 byte to 2 GiB"));
    }
    Ok(bytes as u32)
}

/// A validated factorial design over an rpm run.
#[derive(Debug, Clone)]
pub struct RpmPlan {
    pub base: RpmParams,
    pub factors: Vec<RpmFactor>,
    pub reps: u32,
    pub seed: u64,
    /// The bottleneck queue as `--queue` gave it, for the discipline factor.
    pub queue: Option<QueueSize>,
}

impl RpmPlan {
    /// Checks every factor and combination before anything runs.
    pub fn new(
        base: RpmParams,
        factors: Vec<RpmFactor>,
        reps: u32,
        seed: u64,
        queue: Option<QueueSize>,
    ) -> Result<RpmPlan, AblateError> {
        if factors.is_empty() {
            return Err(AblateError::NoFactor);
        }
        for (i, f) in factors.iter().enumerate() {
            if factors[..i].iter().any(|g| g.factor.name == f.factor.name) {
                return Err(AblateError::Twice(f.factor.name.clone()));
            }
            match (f.knob, &base.placement) {
                (RpmKnob::Discipline, Placement::Netns { link, .. }) if link.rate_bps.is_none() => {
                    return Err(AblateError::Refused {
                        name: f.factor.name.clone(),
                        level: f.factor.levels.join(","),
                        reason: "a queue forms in front of the link's rate: give one (--link-rate or a named link)".into(),
                    });
                }
                (RpmKnob::Discipline, Placement::Netns { .. }) => {}
                (RpmKnob::Discipline, placement) => {
                    return Err(AblateError::Placement {
                        name: f.factor.name.clone(),
                        placement: placement.name(),
                        why: "only a link netlab builds has a bottleneck queue netlab can change; use --placement netns",
                    });
                }
                (RpmKnob::Cc, placement) if !matches!(placement, Placement::Remote { .. }) => {
                    for level in &f.factor.levels {
                        crate::endpoint::rpm::sockets::congestion_available(level).map_err(
                            |e| AblateError::Refused {
                                name: f.factor.name.clone(),
                                level: level.clone(),
                                reason: format!("this kernel refuses it: {e}"),
                            },
                        )?;
                    }
                }
                _ => {}
            }
        }
        let plan = RpmPlan {
            base,
            factors,
            reps,
            seed,
            queue,
        };
        for levels in combinations(&plan.design()) {
            plan.params(&levels)?;
        }
        Ok(plan)
    }

    pub fn design(&self) -> Vec<Factor> {
        self.factors.iter().map(|f| f.factor.clone()).collect()
    }

    fn named(&self, levels: &[usize]) -> Vec<(String, String)> {
        named(&self.design(), levels)
    }

    /// The cell of one combination.
    pub fn params(&self, levels: &[usize]) -> Result<RpmParams, AblateError> {
        let mut params = self.base.clone();
        for (f, &l) in self.factors.iter().zip(levels) {
            let level = f.factor.levels[l].as_str();
            let refused = |reason: String| AblateError::Refused {
                name: f.factor.name.clone(),
                level: level.to_string(),
                reason,
            };
            let sockets = &mut params.sockets;
            match f.knob {
                RpmKnob::NotsentLowat => {
                    sockets.notsent_lowat = (level != "off")
                        .then(|| size(level))
                        .transpose()
                        .map_err(refused)?
                }
                RpmKnob::Sndbuf => {
                    sockets.sndbuf = (level != "default")
                        .then(|| size(level))
                        .transpose()
                        .map_err(refused)?
                }
                RpmKnob::Rcvbuf => {
                    sockets.rcvbuf = (level != "default")
                        .then(|| size(level))
                        .transpose()
                        .map_err(refused)?
                }
                RpmKnob::Cc => sockets.congestion = Some(level.to_string()),
                RpmKnob::Discipline => {
                    if let Placement::Netns { link, via, .. } = &mut params.placement {
                        let rate = link.rate_bps.expect("checked in RpmPlan::new");
                        let discipline = queue_discipline(level, self.queue, rate, link.mtu)
                            .map_err(|e| refused(e.to_string()))?;
                        link.impair.queue_discipline = Some(discipline);
                        // Every level through the emulator's disciplines:
                        // the same code around each, on any kernel.
                        *via = LinkVia::Emulator;
                    }
                }
            }
        }
        let named = self.named(levels);
        params.label = Some(
            named
                .iter()
                .map(|(f, l)| format!("{f}={l}"))
                .collect::<Vec<_>>()
                .join(" "),
        );
        Ok(params)
    }

    pub fn runs(&self) -> usize {
        combinations(&self.design()).len() * self.reps as usize
    }

    /// Refuses a design over `budget`: each run up to its duration, plus
    /// its idle probes and set-up (about 3 s).
    pub fn check_budget(&self, budget: std::time::Duration) -> Result<(), AblateError> {
        check_budget(
            self.runs(),
            self.reps,
            self.base.max_duration_s + 3.0,
            budget,
        )
    }

    /// Every run, block by block, each block in its own seeded order.
    pub fn cells(&self) -> Vec<RpmParams> {
        self.cells_in(crate::record::now_rfc3339())
    }

    /// [`RpmPlan::cells`] of the design `id` (a resumed one's).
    pub fn cells_in(&self, id: String) -> Vec<RpmParams> {
        blocks(&self.design(), self.reps, self.seed)
            .into_iter()
            .map(|(block, levels)| RpmParams {
                design: Some(RpmDesign {
                    id: id.clone(),
                    factors: self.named(&levels),
                    block,
                    seed: self.seed,
                }),
                ..self
                    .params(&levels)
                    .expect("every combination was checked by RpmPlan::new")
            })
            .collect()
    }
}

/// The levels of each run (by the design's factors) and its RPM.
fn runs_of(factors: &[Factor], records: &[Record]) -> Vec<(Vec<usize>, f64)> {
    records
        .iter()
        .filter_map(|r| {
            let design = r.data.params.design.as_ref()?;
            let rpm = r.data.result.as_ref()?.summary.rpm?;
            let levels = factors
                .iter()
                .map(|f| {
                    let (_, level) = design.factors.iter().find(|(n, _)| n == &f.name)?;
                    f.levels.iter().position(|l| l == level)
                })
                .collect::<Option<Vec<usize>>>()?;
            Some((levels, rpm))
        })
        .collect()
}

/// The effects on RPM.
pub fn analyse_rpm(factors: &[Factor], records: &[Record]) -> Result<Analysis, FactorialError> {
    analyse(factors, &runs_of(factors, records), 0.95)
}

/// The median of `values`.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Each combination's medians (RPM, working and idle round trips, the
/// grade of the median added latency), then the effects on RPM.
pub fn text(
    plan: &RpmPlan,
    records: &[Record],
    analysis: &Result<Analysis, FactorialError>,
) -> String {
    let mut out = format!(
        "netlab ablate rpm: {} runs ({} reps), seed {}\n",
        records.len(),
        plan.reps,
        plan.seed
    );
    let mut rows = Vec::new();
    let mut baseline: Option<(Grade, Grade)> = None;
    for levels in combinations(&plan.design()) {
        let named = plan.named(&levels);
        let of: Vec<&Record> = records
            .iter()
            .filter(|r| {
                r.data
                    .params
                    .design
                    .as_ref()
                    .is_some_and(|d| d.factors == named)
            })
            .collect();
        let pick = |f: fn(&crate::experiments::rpm::record::Summary) -> Option<f64>| {
            let mut v: Vec<f64> = of
                .iter()
                .filter_map(|r| r.data.result.as_ref().and_then(|x| f(&x.summary)))
                .collect();
            median(&mut v)
        };
        let (rpm, working, idle, loaded) = (
            pick(|s| s.rpm),
            pick(|s| s.working_ms),
            pick(|s| s.idle_ms),
            pick(|s| s.tm_http_l_ms),
        );
        let grade_of = |ms: Option<f64>| {
            ms.zip(idle)
                .map(|(w, i)| Grade::of_added_ms((w - i).max(0.0)))
        };
        let (grade, grade_loaded) = (grade_of(working), grade_of(loaded));
        if levels.iter().all(|&l| l == 0) {
            baseline = grade.zip(grade_loaded);
        }
        let steps = match (grade.zip(grade_loaded), baseline) {
            (Some((g, l)), Some((bg, bl))) => {
                format!("{:+} / {:+}", g.steps_above(bg), l.steps_above(bl))
            }
            _ => "-".into(),
        };
        let finals = of
            .iter()
            .filter(|r| r.data.result.as_ref().is_some_and(|x| x.summary.is_final))
            .count();
        rows.push(vec![
            named
                .iter()
                .map(|(f, l)| format!("{f}={l}"))
                .collect::<Vec<_>>()
                .join(" "),
            rpm.map_or("-".into(), |v| format!("{v:.0}")),
            working.map_or("-".into(), num),
            loaded.map_or("-".into(), num),
            idle.map_or("-".into(), num),
            format!(
                "{} / {}",
                grade.map_or("-", |g| g.name()),
                grade_loaded.map_or("-", |g| g.name())
            ),
            steps,
            format!("{finals}/{}", of.len()),
        ]);
    }
    out.push_str(&markdown(
        &[
            "combination",
            "RPM (median)",
            "working ms",
            "self probes ms",
            "idle ms",
            "grade (all / loaded)",
            "grades above the baseline",
            "final runs",
        ],
        &rows,
    ));
    out.push_str(&effects_text(analysis));
    out
}

/// The factorial's effects on RPM, main and interactions, each with its
/// interval and whether it stands beyond the runs' noise.
fn effects_text(analysis: &Result<Analysis, FactorialError>) -> String {
    let mut out = String::new();
    match analysis {
        Ok(a) => {
            out.push_str(&format!(
                "\nEffects on RPM (grand mean {:.0}; 95% intervals {}):\n",
                a.grand_mean,
                if a.t.is_some() {
                    "from the runs' spread"
                } else {
                    "need 2 reps or more"
                }
            ));
            let effects: Vec<Vec<String>> = a
                .main
                .iter()
                .chain(a.interactions.iter())
                .map(|e| {
                    vec![
                        e.factors
                            .iter()
                            .map(|(f, l)| format!("{f}={l}"))
                            .collect::<Vec<_>>()
                            .join(" x "),
                        format!("{:+.0}", e.estimate),
                        e.half_width.map_or("-".into(), |h| format!("±{h:.0}")),
                        if e.significant() { "yes" } else { "no" }.into(),
                    ]
                })
                .collect();
            out.push_str(&markdown(
                &["effect", "RPM", "interval", "beyond noise"],
                &effects,
            ));
        }
        Err(e) => out.push_str(&format!("\nno effects: {e}\n")),
    }
    out
}

pub fn run(args: AblateRpmArgs, out: &mut Output) -> anyhow::Result<()> {
    let base = args.rpm.params()?;
    let factors = args
        .factors
        .iter()
        .map(|f| RpmFactor::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    let queue = args
        .rpm
        .place
        .queue
        .as_deref()
        .map(parse_queue_size)
        .transpose()?;
    // A resumed design runs in its own order, under its own id.
    let earlier = args
        .rpm
        .run
        .earlier::<RpmDesign>("rpm", "/params/design")?
        .filter(|e| args.seed.is_none_or(|seed| seed == e.seed));
    let seed = match (args.seed, &earlier) {
        (Some(seed), _) => seed,
        (None, Some(earlier)) => earlier.seed,
        (None, None) => fresh_seed().context("a random seed")?,
    };
    let plan = RpmPlan::new(base, factors, args.reps, seed, queue)?;
    plan.check_budget(args.budget)?;
    let cells = match earlier {
        Some(earlier) => plan.cells_in(earlier.id),
        None => plan.cells(),
    };
    args.rpm.run.measure(out, |runner| {
        let records = runner.grid(&mut RpmMeasure, &cells)?;
        Ok(measured(&plan, records))
    })
}

/// The factorial's effects on RPM beside the records, and the text.
fn measured(plan: &RpmPlan, records: Vec<Record>) -> RunOutcome<RpmData> {
    let analysis = analyse_rpm(&plan.design(), &records);
    let doc = serde_json::json!({
        "experiment": "ablate rpm",
        "seed": plan.seed,
        "factors": plan.design().iter().map(|f| (f.name.clone(), f.levels.clone())).collect::<Vec<_>>(),
        "effects": analysis.as_ref().ok().map(|a| a.main.iter().chain(a.interactions.iter()).map(|e| serde_json::json!({
            "factors": e.factors, "estimate": e.estimate, "half_width": e.half_width,
        })).collect::<Vec<_>>()),
        "records": records,
    });
    let text = text(plan, &records, &analysis);
    RunOutcome::grid(records, doc, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::rpm::types::{Direction, LoadSockets};

    fn base(placement: Placement) -> RpmParams {
        RpmParams {
            placement,
            direction: Direction::Down,
            max_connections: 16,
            probe_rate: 100,
            max_duration_s: 10.0,
            idle_probes: 10,
            sockets: LoadSockets::default(),
            label: None,
            design: None,
            irtt: false,
        }
    }

    fn netns(rate: Option<&str>) -> Placement {
        let link = crate::record::testbed::LinkProfile::with_overrides(
            &crate::testbed::link::LinkOverrides {
                rate: rate.map(String::from),
                ..Default::default()
            },
        )
        .unwrap();
        Placement::Netns {
            link,
            via: LinkVia::Auto,
            capture: false,
            pcap: None,
            verbose: false,
        }
    }

    fn factors(texts: &[&str]) -> Vec<RpmFactor> {
        texts.iter().map(|t| RpmFactor::parse(t).unwrap()).collect()
    }

    #[test]
    fn each_block_runs_every_fix_once_in_its_own_order() {
        let plan = RpmPlan::new(
            base(netns(Some("50mbit"))),
            factors(&["discipline=droptail,fq_codel", "notsent-lowat=off,16K"]),
            3,
            7,
            Some(QueueSize::Packets(1000)),
        )
        .unwrap();
        let cells = plan.cells();
        assert_eq!(cells.len(), 12);
        for block in cells.chunks(4) {
            let mut seen: Vec<_> = block.iter().map(|c| c.label.clone()).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 4);
        }
        let fixed = cells
            .iter()
            .find(|c| c.label.as_deref() == Some("discipline=fq_codel notsent-lowat=16K"))
            .unwrap();
        assert_eq!(fixed.sockets.notsent_lowat, Some(16384));
        let Placement::Netns { link, via, .. } = &fixed.placement else {
            panic!("netns")
        };
        assert_eq!(*via, LinkVia::Emulator);
        assert!(matches!(
            link.impair.queue_discipline,
            Some(crate::record::testbed::QueueDiscipline::FqCodel(
                crate::record::testbed::FqCodelQueue {
                    limit_packets: 1000,
                    ..
                }
            ))
        ));
        // The same seed, the same order.
        let again = plan.cells();
        let labels = |c: &[RpmParams]| c.iter().map(|p| p.label.clone()).collect::<Vec<_>>();
        assert_eq!(labels(&again), labels(&cells));
    }

    #[test]
    fn refusals_name_the_factor_and_why() {
        let e = RpmPlan::new(
            base(Placement::Loopback),
            factors(&["discipline=droptail,fq_codel"]),
            1,
            1,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("use --placement netns"), "{e}");
        let e = RpmPlan::new(
            base(netns(None)),
            factors(&["discipline=droptail,fq_codel"]),
            1,
            1,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("in front of the link's rate"), "{e}");
        let e = RpmFactor::parse("discipline=droptail,red")
            .unwrap_err()
            .to_string();
        assert!(e.contains("red is not a level"), "{e}");
        let e = RpmFactor::parse("nodelay=off,on").unwrap_err().to_string();
        assert!(e.contains("not a factor of rpm"), "{e}");
        let e = RpmFactor::parse("notsent-lowat=off")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least two levels"), "{e}");
        let plan = RpmPlan::new(
            base(Placement::Loopback),
            factors(&["notsent-lowat=off,16K", "sndbuf=default,64K"]),
            10,
            1,
            None,
        )
        .unwrap();
        let e = plan
            .check_budget(std::time::Duration::from_secs(60))
            .unwrap_err()
            .to_string();
        assert!(e.contains("40 runs"), "{e}");
    }
}
