//! login's share of the lab: 1989's users typing through each of netlab's
//! relay designs and the real servers beside them, then where each design
//! melts on a 1989-class host (its limit under a preset CPU budget).

use super::cell::{LimitSearch, LoginMeasure, LoginPlan, PROBE_ECHOES, find_limits};
use super::record::LoginParams;
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile, where_run};
use crate::endpoint::login::host::{DEFAULT_CORPUS, Dialect, Target};
use crate::endpoint::login::server::Relay;
use crate::record::testbed::Placement;
use crate::testbed::cgroup::{self, HostPreset, PresetBudget};
use crate::testbed::netns::has_net_admin;

/// Each relay design's limit (the most users it serves normally) under a
/// preset CPU budget, as `netlab login --host-cpu PRESET --find-limit`.
#[derive(Debug, Clone)]
pub struct DesignLimits {
    pub preset: HostPreset,
    /// Designs, windows and the first count (its budget is set at run time).
    pub login: LoginPlan,
    pub search: LimitSearch,
}

impl DesignLimits {
    fn new(profile: Profile) -> DesignLimits {
        let (relays, windows, search) = profile.pick(
            // The same pair, half-second windows, a coarse search whose
            // probes hold a hundred keystrokes (the pipeline, not the limit).
            (
                vec![Target::Fork, Target::Splice],
                LoginPlan {
                    warmup_s: 0.2,
                    duration_s: 0.5,
                    ..LoginPlan::smoke()
                },
                LimitSearch {
                    start: 16,
                    max_users: 64,
                    resolution: 2,
                    echoes: PROBE_ECHOES / 4,
                },
            ),
            // 1989's pair: a process per session, as the normal rlogind,
            // against the kernel-assisted analogue (splice), from 64 users,
            // bisected to half the limit with 1 s warm-ups and 4 s windows,
            // each side of the boundary confirmed. `--find-limit` and
            // `--full` bisect to an eighth with 5 s windows (a load a few
            // percent past the CPU needs seconds to push echoes past
            // 100 ms: 1 s windows overstated the limit, 96 users where 5 s
            // found 80); those took 20 probes and 126 s of this profile's
            // three minutes (2026-12-02), a quarter with 5 s windows 12
            // probes and 76 s. About five probes a server, under a minute.
            (
                vec![Target::Fork, Target::Splice],
                LoginPlan {
                    warmup_s: 1.0,
                    duration_s: 4.0,
                    ..LoginPlan::quick()
                },
                LimitSearch {
                    start: 64,
                    max_users: 128,
                    resolution: 2,
                    echoes: PROBE_ECHOES,
                },
            ),
            (
                Relay::ALL.into_iter().map(Target::of).collect(),
                LoginPlan {
                    warmup_s: 1.0,
                    duration_s: 5.0,
                    ..LoginPlan::full()
                },
                LimitSearch {
                    start: 16,
                    max_users: 1024,
                    resolution: 8,
                    echoes: PROBE_ECHOES,
                },
            ),
        );
        DesignLimits {
            preset: HostPreset::Sun3,
            login: LoginPlan {
                users: vec![search.start],
                relays,
                protocols: vec![Dialect::Rlogin],
                placements: vec![Placement::Loopback],
                ..windows
            },
            search,
        }
    }

    /// The plan with its budget: this host's packet cost measured now, or
    /// the stored calibration at `calibration`. Why not, when this host
    /// cannot give a server a budget.
    /// `earlier`, a resumed lab's budget (its percent and preset), is
    /// taken as it was: the same host as the cells it measured.
    pub fn budgeted(
        &self,
        calibration: Option<&std::path::Path>,
        earlier: Option<(f64, PresetBudget)>,
    ) -> Result<LoginPlan, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("a CPU budget needs root (a cgroup of the CPU controller)".into());
        }
        cgroup::available().map_err(|e| e.to_string())?;
        let (percent, preset) = match earlier {
            Some((percent, preset)) if calibration.is_none() => (percent, preset),
            _ => {
                let calibrated = super::cell::calibrate(calibration).map_err(|e| e.to_string())?;
                self.preset.budget_calibrated(&calibrated)
            }
        };
        cgroup::check(percent).map_err(|e| e.to_string())?;
        Ok(LoginPlan {
            host_cpu_pct: Some(percent),
            host_cpu_preset: Some(preset),
            ..self.login.clone()
        })
    }
}

/// The lab's typing test and design limits.
#[derive(Debug, Clone)]
pub struct LoginLab {
    pub plan: LoginPlan,
    pub cells: Vec<LoginParams>,
    /// What was left out, and why.
    pub skipped: Vec<String>,
    /// 1989's shape: each design's limit on a 1989-class host (none across
    /// hosts: the preset is calibrated on the serving host).
    pub limits: Option<DesignLimits>,
}

impl LoginLab {
    pub fn new(profile: Profile) -> LoginLab {
        let plan = profile.pick(LoginPlan::smoke(), LoginPlan::quick(), LoginPlan::full());
        let servers = Target::servers_here();
        let mut cells = Vec::new();
        for &users in &plan.users {
            for &(relay, protocol) in &servers {
                cells.push(plan.cell(relay, protocol, &Placement::Loopback, users));
            }
        }
        // Over a 10 Mbit/s Ethernet too, one design at the first count: the
        // packets in and out are then the interface's, as in 1989's vmstat.
        if has_net_admin() {
            cells.push(plan.cell(
                Target::Epoll,
                Dialect::Rlogin,
                &Placement::ether10(),
                plan.users[0],
            ));
        }
        LoginLab {
            plan,
            cells,
            skipped: Vec::new(),
            limits: Some(DesignLimits::new(profile)),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }

    /// 1989's shape: where each design melts on a 1989-class host.
    fn run_limits(&self, lab: &mut Lab, limits: &DesignLimits) -> Result<(), LabError> {
        // A resumed lab emulates the host its earlier cells were measured on.
        let earlier = lab
            .runner
            .earlier::<f64>("login", "/params/host_cpu_pct")
            .zip(
                lab.runner
                    .earlier::<PresetBudget>("login", "/params/host_cpu_preset"),
            )
            .filter(|(_, preset)| preset.name == limits.preset.name());
        let budgeted = match limits.budgeted(lab.calibration.as_deref(), earlier) {
            Ok(budgeted) => budgeted,
            Err(why) => {
                return lab.skipped(format!("each design's limit on a 1989-class host: {why}"));
            }
        };
        if let Err(why) = budgeted.check_limits(limits.search.max_users) {
            return lab.skipped(format!("each design's limit on a 1989-class host: {why}"));
        }
        if let Some(preset) = &budgeted.host_cpu_preset {
            eprintln!(
                "lab: login limits on a 1989-class host, --host-cpu {}",
                preset.derivation
            );
        }
        let mut typing = LoginMeasure::new(DEFAULT_CORPUS.as_bytes().to_vec())?;
        let mut records = Vec::new();
        find_limits(
            lab.runner,
            &mut typing,
            &budgeted,
            limits.search,
            &mut records,
        )?;
        lab.measured(report::design_limits(&records))
    }
}

impl LabPart for LoginLab {
    /// netlab's own designs where both ends allow login; the real servers
    /// (whose presence on an agent's host this host cannot see) and the
    /// limits (calibrated on the serving host) are left out, with the
    /// command that runs them.
    fn across(&mut self, across: &Across) {
        let (from, to) = (across.from, across.to);
        let path = across.path();
        self.skipped = across.not_served("login");
        self.cells = if self.skipped.is_empty() {
            let mut cells = Vec::new();
            for &users in &self.plan.users {
                for relay in Relay::ALL {
                    cells.push(
                        self.plan
                            .cell(Target::of(relay), Dialect::Rlogin, &path, users),
                    );
                }
            }
            self.skipped.push(format!(
                "telnetd and sshd across agents (this host cannot see whether the agent's host has them): netlab login --relay telnetd,sshd --from {from} --to {to}"
            ));
            cells
        } else {
            Vec::new()
        };
        self.limits = None;
        self.skipped.push(format!(
            "each design's limit on a 1989-class host (--host-cpu sun3 is calibrated on the serving host, this one): netlab login --host-cpu PERCENT --find-limit --from {from} --to {to}"
        ));
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        // 1989: users typing through rlogind, one relay design against
        // another; the real servers beside them where this machine has them.
        for note in &self.skipped {
            lab.skipped(note.clone())?;
        }
        let most_users = self.plan.users.iter().copied().max().unwrap_or(0);
        let fits = self.plan.check_limits(most_users);
        if let Err(why) = &fits {
            lab.skipped(format!("login: {why}"))?;
        }
        if !self.cells.is_empty() && fits.is_ok() {
            eprintln!(
                "lab: login, {:?} users typing 5 chars/s through each relay design ({} s windows)",
                self.plan.users, self.plan.duration_s
            );
            let mut typing = LoginMeasure::new(DEFAULT_CORPUS.as_bytes().to_vec())?;
            let records = lab.runner.grid(&mut typing, &self.cells)?;
            lab.measured(format!(
                "netlab login: users typing 5 chars/s into `cat > /dev/null` (netlab's designs over rlogin), {} s windows, {}\n{}",
                self.plan.duration_s,
                where_run(records.iter().map(|r| &r.data.params.placement)),
                report::table(&records)
            ))?;
        }
        if let Some(limits) = &self.limits {
            self.run_limits(lab, limits)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1989_counts_and_a_limit_search_per_profile() {
        let quick = LoginLab::new(Profile::Quick);
        assert_eq!(quick.plan.users, [16, 48]);
        assert!(
            quick
                .cells
                .iter()
                .any(|c| c.relay == Target::Fork && c.users == 48)
        );
        let limits = quick.limits.as_ref().expect("a limit search");
        assert_eq!(limits.login.relays, [Target::Fork, Target::Splice]);
        assert_eq!(limits.search.max_users, 128);
        let full = LoginLab::new(Profile::Full);
        assert_eq!(full.plan.users, [16, 32, 48]);
        assert_eq!(full.limits.expect("a limit search").search.max_users, 1024);
    }

    #[test]
    fn across_hosts_only_netlab_s_designs_where_both_ends_allow_login() {
        let remote = Placement::Remote {
            from: "a:5310".into(),
            to: "b:5310".into(),
        };
        let mut part = LoginLab::new(Profile::Quick);
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        assert!(!part.cells.is_empty());
        assert!(
            part.cells
                .iter()
                .all(|c| c.placement == remote && c.relay.relay().is_some())
        );
        assert!(part.limits.is_none());
        // An agent that does not allow login: no cells, and why.
        let mut part = LoginLab::new(Profile::Quick);
        part.across(&Across {
            from: "local",
            to: "b:5310",
            serves: &|end, experiment| end == "local" || experiment != "login",
        });
        assert!(part.cells.is_empty());
        assert!(
            part.skipped[0].contains("--allow login"),
            "{:?}",
            part.skipped
        );
    }
}
